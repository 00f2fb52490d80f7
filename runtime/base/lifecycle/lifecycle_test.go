package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// order records events.
type order struct {
	mu  sync.Mutex
	got []string
}

func (o *order) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, s)
}

func (o *order) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.got, " ")
}

// Parts start in order and stop in reverse: each Run has returned before
// its Close, and a later part is closed before an earlier one.
func TestStartInOrderStopInReverse(t *testing.T) {
	var o order
	var g Group
	started := make(chan string, 3)
	for _, name := range []string{"store", "guild", "gateway"} {
		if err := g.Add(Part{
			Name: name,
			Run: func(ctx context.Context) error {
				started <- name
				<-ctx.Done()
				o.add("stop:" + name)
				return nil
			},
			Close: func() error { o.add("close:" + name); return nil },
		}); err != nil {
			t.Fatal(err)
		}
	}
	g.Start(context.Background())
	for range 3 {
		<-started
	}
	if err := g.Ready(); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "stop:gateway close:gateway stop:guild close:guild stop:store close:store"
	if o.String() != want {
		t.Fatalf("order %q, want %q", o.String(), want)
	}
	if err := g.Ready(); err == nil {
		t.Fatal("ready after Stop")
	}
	if err := g.Add(Part{Name: "late"}); err == nil {
		t.Fatal("Add after Stop accepted")
	}
}

// Readiness is every part's: one part not ready makes the group not
// ready, naming it.
func TestReadyAggregates(t *testing.T) {
	var g Group
	if g.Ready() == nil {
		t.Fatal("ready before Start")
	}
	var mu sync.Mutex
	lagging := errors.New("registry lease not granted")
	state := lagging
	g.Add(Part{Name: "http"})
	g.Add(Part{Name: "registry", Ready: func() error { mu.Lock(); defer mu.Unlock(); return state }})
	g.Start(context.Background())
	if err := g.Ready(); !errors.Is(err, lagging) || !strings.Contains(err.Error(), "registry") {
		t.Fatalf("ready = %v, want the registry's reason", err)
	}
	mu.Lock()
	state = nil
	mu.Unlock()
	if err := g.Ready(); err != nil {
		t.Fatalf("ready = %v", err)
	}
	_ = g.Stop(context.Background())
}

// A Run that fails on its own is reported through Failed; Stop still
// closes everything and reports a part that does not stop in time.
func TestFailureAndStuckPart(t *testing.T) {
	var g Group
	boom := errors.New("consumer lost its partitions")
	closed := false
	g.Add(Part{Name: "stuck", Run: func(ctx context.Context) error { select {} }, Close: func() error { closed = true; return nil }})
	g.Add(Part{Name: "consumer", Run: func(ctx context.Context) error { return boom }})
	g.Start(context.Background())
	select {
	case err := <-g.Failed():
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "consumer") {
			t.Fatalf("failed = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no failure reported")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := g.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "stuck: did not stop") {
		t.Fatalf("stop = %v, want the stuck part named", err)
	}
	if closed {
		t.Fatal("a part that did not stop was closed under its Run")
	}
}

// Drain runs the started parts' drains at once (a slow one does not hold
// another back), skips parts not started, and returns when all did.
func TestDrainRunsStartedPartsAtOnce(t *testing.T) {
	var g Group
	both := make(chan struct{})
	var mu sync.Mutex
	var drained []string
	drain := func(name string) func(context.Context) {
		return func(ctx context.Context) {
			mu.Lock()
			drained = append(drained, name)
			if len(drained) == 2 {
				close(both)
			}
			mu.Unlock()
			// Each waits for the other: run one after the other, they
			// would wait out ctx.
			select {
			case <-both:
			case <-ctx.Done():
				t.Errorf("%s drained alone until its deadline", name)
			}
		}
	}
	g.Add(Part{Name: "a", Drain: drain("a")})
	g.Add(Part{Name: "b", Drain: drain("b")})
	g.Start(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.Drain(ctx)
	if len(drained) != 2 {
		t.Fatalf("drained %v, want both parts", drained)
	}
	var late Group
	late.Add(Part{Name: "never started", Drain: func(context.Context) { t.Error("a part never started was drained") }})
	late.Drain(ctx)
}
