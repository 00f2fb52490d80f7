package mem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters/counterstest"
	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
)

func newCounters(t testing.TB) counterstest.Harness {
	clock := counterstest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c, err := mem.New(mem.Config{Now: clock.Now, Shards: 8, SweepEvery: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return counterstest.Harness{Counters: c, Advance: clock.Advance}
}

func TestConformance(t *testing.T) {
	counterstest.Run(t, newCounters)
}

// BenchmarkCounters runs the port's benchmarks with the default Config and
// the real clock, as `concord dev` runs it.
func BenchmarkCounters(b *testing.B) {
	counterstest.Bench(b, func(t testing.TB) counterstest.Harness {
		c, err := mem.New(mem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return counterstest.Harness{Counters: c, Advance: time.Sleep}
	})
}

// TestSweep checks that expired entries are dropped as shards are written,
// so a long-running `concord dev` does not keep every key it ever saw.
func TestSweep(t *testing.T) {
	clock := counterstest.NewClock(time.Unix(1_000_000, 0))
	c, err := mem.New(mem.Config{Now: clock.Now, Shards: 1, SweepEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 100 {
		k := fmt.Sprint(i)
		if _, err := c.Incr(ctx, k, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(ctx, k, 1, time.Second, clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := c.Ban(ctx, k, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 300 {
		t.Fatalf("Len = %d, want 300 live entries", n)
	}
	clock.Advance(2 * time.Second)
	for i := range 10 {
		if _, err := c.Incr(ctx, fmt.Sprint("new", i), 1, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 10 {
		t.Fatalf("Len after expiry and writes = %d, want the 10 new counters", n)
	}
}
