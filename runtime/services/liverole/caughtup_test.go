package liverole

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
)

// gated marks a record of partition p only after a token arrives on
// gates[p], so the test decides how far the member has caught up.
type gated struct{ gates map[int32]chan struct{} }

func (gated) Setup(context.Context, eventlog.Session) error   { return nil }
func (gated) Cleanup(context.Context, eventlog.Session) error { return nil }
func (g gated) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	for {
		var rec eventlog.Record
		select {
		case r, ok := <-c.Records():
			if !ok {
				return nil
			}
			rec = r
		case <-ctx.Done():
			return nil
		}
		select {
		case <-g.gates[c.Partition()]:
		case <-ctx.Done():
			return nil
		}
		s.Mark(c.Topic(), c.Partition(), rec.Offset+1)
	}
}

// awaitReady polls ready until its answer satisfies ok (a state, not a
// duration: the deadline only bounds the wait).
func awaitReady(t *testing.T, ready func() error, what string, ok func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ready()
		if ok(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness never became %s: last %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func says(s string) func(error) bool {
	return func(err error) bool { return err != nil && strings.Contains(err.Error(), s) }
}

func TestCaughtUpReadiness(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lg, err := memlog.New(memlog.Config{Partitions: 2, NoSync: true, CommitInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	const topic = "comments"
	cu, err := newCaughtUp(ctx, lg, NameRouter, "routers", topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := cu.Ready(); err == nil || !strings.Contains(err.Error(), "not in a generation") {
		t.Fatalf("before consuming: Ready() = %v", err)
	}
	// Records waiting before the member joins: 3 on partition 0, 2 on 1.
	for p, n := range map[int32]int{0: 3, 1: 2} {
		for range n {
			if _, err := lg.AppendTo(ctx, topic, p, eventlog.Record{Topic: topic, Value: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	g := gated{gates: map[int32]chan struct{}{0: make(chan struct{}, 8), 1: make(chan struct{}, 8)}}
	go cu.Consume(ctx, "routers", []string{topic}, g)
	awaitReady(t, cu.Ready, "catching up on 2", says("catching up on 2 of 2"))
	// Partition 0 fully processed, partition 1 half: still catching up.
	for range 3 {
		g.gates[0] <- struct{}{}
	}
	g.gates[1] <- struct{}{}
	awaitReady(t, cu.Ready, "catching up on 1", says("catching up on 1 of 2"))
	g.gates[1] <- struct{}{}
	awaitReady(t, cu.Ready, "ready", func(err error) bool { return err == nil })

	// A second member of a one-partition group owns nothing: unready,
	// saying so, while the owner is ready.
	if err := lg.EnsureTopic(ctx, "single", 1); err != nil {
		t.Fatal(err)
	}
	open := gated{gates: map[int32]chan struct{}{0: make(chan struct{})}}
	close(open.gates[0])
	a, err := newCaughtUp(ctx, lg, NameArchiver, "archivers", "single")
	if err != nil {
		t.Fatal(err)
	}
	go a.Consume(ctx, "archivers", []string{"single"}, open)
	awaitReady(t, a.Ready, "ready", func(err error) bool { return err == nil })
	b, err := newCaughtUp(ctx, lg, NameArchiver, "archivers", "single")
	if err != nil {
		t.Fatal(err)
	}
	go b.Consume(ctx, "archivers", []string{"single"}, open)
	awaitReady(t, func() error {
		ea, eb := a.Ready(), b.Ready()
		if (ea == nil) == (eb == nil) {
			return nil // not settled yet: exactly one of them should own it
		}
		if ea == nil {
			return eb
		}
		return ea
	}, "one owner and one without a partition", func(err error) bool {
		// Kafka runs a generation for a member without partitions
		// (Setup with no claims); memlog leaves it waiting outside one.
		return says("owns no partition of single")(err) || says("not in a generation")(err)
	})
}
