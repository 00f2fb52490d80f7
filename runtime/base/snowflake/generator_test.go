package snowflake_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeClock is a wall clock the test moves; Sleep advances it.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
	onNow func(calls int) // optional hook, called with the lock held
	calls int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.onNow != nil {
		c.onNow(c.calls)
	}
	return c.t
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

func mustNew(t *testing.T, cfg snowflake.Config) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustNext(t *testing.T, g *snowflake.Generator) snowflake.ID {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []snowflake.Config{{Worker: -1}, {Worker: 32}, {Process: -1}, {Process: 32}} {
		if _, err := snowflake.New(cfg); !errors.Is(err, snowflake.ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
	for _, cfg := range []snowflake.Config{{}, {Worker: 31, Process: 31}} {
		if _, err := snowflake.New(cfg); err != nil {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	clock := &fakeClock{t: t0.Add(123 * time.Millisecond)}
	g := mustNew(t, snowflake.Config{Worker: 17, Process: 9, Now: clock.Now, Sleep: clock.Sleep})
	id := mustNext(t, g)
	if !id.Time().Equal(clock.t) || id.Worker() != 17 || id.Process() != 9 || id.Sequence() != 0 {
		t.Fatalf("id %d: time %v worker %d process %d seq %d", id, id.Time(), id.Worker(), id.Process(), id.Sequence())
	}
	want := uint64(clock.t.UnixMilli()-1420070400000)<<22 | 17<<17 | 9<<12
	if uint64(id) != want {
		t.Fatalf("id %d, want %d", id, want)
	}
	if c := snowflake.Compose(clock.t, 17, 9, 0); c != id {
		t.Fatalf("Compose = %d, want %d", c, id)
	}
	if id2 := mustNext(t, g); id2 != id+1 || id2.Sequence() != 1 {
		t.Fatalf("second id in the same ms: %d", id2)
	}
	// Discord's documented example: 175928847299117063 is 2016-04-30
	// 11:18:25.796 UTC, worker 1, process 0, increment 7.
	d := snowflake.ID(175928847299117063)
	if d.Time().UnixMilli() != 1462015105796 || d.Worker() != 1 || d.Process() != 0 || d.Sequence() != 7 {
		t.Fatalf("Discord example decodes to %v %d %d %d", d.Time(), d.Worker(), d.Process(), d.Sequence())
	}
	if s := d.String(); s != "175928847299117063" {
		t.Fatal(s)
	}
	if p, err := snowflake.Parse(d.String()); err != nil || p != d {
		t.Fatal(p, err)
	}
}

func TestMonotonicRealClock(t *testing.T) {
	g := mustNew(t, snowflake.Config{Worker: 1})
	prev := mustNext(t, g)
	for range 200_000 {
		id := mustNext(t, g)
		if id <= prev {
			t.Fatalf("id %d after %d", id, prev)
		}
		if id.Worker() != 1 || id.Process() != 0 {
			t.Fatalf("id %d has worker %d process %d", id, id.Worker(), id.Process())
		}
		prev = id
	}
	if d := time.Since(prev.Time()); d < -time.Millisecond || d > time.Second {
		t.Fatalf("last id is %v from now", d)
	}
}

func TestUniqueConcurrent(t *testing.T) {
	const goroutines, each = 8, 100_000
	g := mustNew(t, snowflake.Config{Worker: 3, Process: 4})
	results := make([][]snowflake.ID, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			ids := make([]snowflake.ID, each)
			for k := range ids {
				id, err := g.Next()
				if err != nil {
					t.Error(err)
					return
				}
				if k > 0 && id <= ids[k-1] {
					t.Errorf("goroutine %d: id %d after %d", i, id, ids[k-1])
					return
				}
				ids[k] = id
			}
			results[i] = ids
		})
	}
	wg.Wait()
	seen := make(map[snowflake.ID]struct{}, goroutines*each)
	for _, ids := range results {
		for _, id := range ids {
			if _, dup := seen[id]; dup {
				t.Fatalf("duplicate id %d", id)
			}
			seen[id] = struct{}{}
		}
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d ids, want %d", len(seen), goroutines*each)
	}
	t.Logf("%d goroutines × %d ids: %d unique", goroutines, each, len(seen))
}

func TestSequenceExhaustionMovesToNextMillisecond(t *testing.T) {
	clock := &fakeClock{t: t0}
	// The clock stays on t0 until 4096 ids are out plus a few spins, then
	// moves one millisecond.
	clock.onNow = func(calls int) {
		if calls == 4096+10 {
			clock.t = clock.t.Add(time.Millisecond)
		}
	}
	g := mustNew(t, snowflake.Config{Now: clock.Now, Sleep: clock.Sleep})
	for seq := range 4096 {
		id := mustNext(t, g)
		if id.Sequence() != seq || !id.Time().Equal(t0) {
			t.Fatalf("id %d: seq %d time %v, want seq %d at t0", id, id.Sequence(), id.Time(), seq)
		}
	}
	id := mustNext(t, g)
	if id.Sequence() != 0 || !id.Time().Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("after exhaustion: seq %d time %v", id.Sequence(), id.Time())
	}
	if clock.calls < 4096+10 {
		t.Fatalf("Next did not wait for the clock (%d reads)", clock.calls)
	}
	if len(clock.slept) != 0 {
		t.Fatalf("exhaustion is not a backwards step, but slept %v", clock.slept)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "concord_snowflake_clock_backwards_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("counter not registered")
	return 0
}

func TestClockBackwardsWaits(t *testing.T) {
	reg := prometheus.NewRegistry()
	clock := &fakeClock{t: t0}
	g := mustNew(t, snowflake.Config{Now: clock.Now, Sleep: clock.Sleep, Registerer: reg})
	a := mustNext(t, g)
	clock.Set(t0.Add(-1500 * time.Millisecond)) // NTP steps back 1.5s
	b := mustNext(t, g)
	if b <= a {
		t.Fatalf("id %d after %d", b, a)
	}
	if len(clock.slept) != 1 || clock.slept[0] != 1500*time.Millisecond {
		t.Fatalf("slept %v, want [1.5s]", clock.slept)
	}
	if !b.Time().Equal(t0) || b.Sequence() != 1 {
		t.Fatalf("after waiting: time %v seq %d", b.Time(), b.Sequence())
	}
	if v := counterValue(t, reg); v != 1 {
		t.Fatalf("counter %v, want 1", v)
	}
	// A second generator on the same registerer shares the counter.
	if _, err := snowflake.New(snowflake.Config{Worker: 1, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
}

func TestClockBackwardsRefuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	clock := &fakeClock{t: t0}
	g := mustNew(t, snowflake.Config{Now: clock.Now, Sleep: clock.Sleep, Registerer: reg, MaxBackwardsWait: time.Second})
	a := mustNext(t, g)
	clock.Set(t0.Add(-5 * time.Second))
	if id, err := g.Next(); !errors.Is(err, snowflake.ErrClockBackwards) {
		t.Fatalf("Next = %d, %v; want ErrClockBackwards", id, err)
	}
	if len(clock.slept) != 0 {
		t.Fatalf("slept %v", clock.slept)
	}
	if v := counterValue(t, reg); v != 1 {
		t.Fatalf("counter %v, want 1", v)
	}
	// Once the clock is back past the last id, ids resume above it.
	clock.Set(t0.Add(time.Millisecond))
	if b := mustNext(t, g); b <= a {
		t.Fatalf("id %d after %d", b, a)
	}
}

func TestClockBackwardsNeverWaitWhenNegative(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := mustNew(t, snowflake.Config{Now: clock.Now, Sleep: clock.Sleep, MaxBackwardsWait: -1})
	mustNext(t, g)
	clock.Set(t0.Add(-time.Millisecond))
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrClockBackwards) {
		t.Fatalf("err %v", err)
	}
}

func TestClockBackwardsConcurrent(t *testing.T) {
	// Many goroutines hit a clock that keeps stepping back by less than the
	// limit: every id is still unique and each goroutine's ids increase.
	var now atomic.Int64
	now.Store(t0.UnixNano())
	var n atomic.Int64
	nowFn := func() time.Time {
		k := n.Add(1)
		if k%1000 == 0 {
			return time.Unix(0, now.Add(-int64(3*time.Millisecond))) // step back
		}
		return time.Unix(0, now.Add(int64(time.Microsecond)))
	}
	sleep := func(d time.Duration) { now.Add(int64(d)) }
	g := mustNew(t, snowflake.Config{Now: nowFn, Sleep: sleep})
	var mu sync.Mutex
	seen := map[snowflake.ID]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var prev snowflake.ID
			local := make([]snowflake.ID, 0, 20_000)
			for range 20_000 {
				id, err := g.Next()
				if err != nil {
					t.Error(err)
					return
				}
				if id <= prev {
					t.Errorf("id %d after %d", id, prev)
					return
				}
				prev = id
				local = append(local, id)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate %d", id)
					return
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

func TestTimeRange(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(snowflake.Epoch - 1)}
	g := mustNew(t, snowflake.Config{Now: clock.Now, Sleep: clock.Sleep})
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrTimeRange) {
		t.Fatalf("before epoch: %v", err)
	}
	clock.Set(time.UnixMilli(snowflake.Epoch + 1<<42))
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrTimeRange) {
		t.Fatalf("after 2154: %v", err)
	}
	clock.Set(time.UnixMilli(snowflake.Epoch + 1<<42 - 1))
	id := mustNext(t, g)
	if id>>22 != 1<<42-1 {
		t.Fatalf("last representable ms: %d", id)
	}
}
