package snowflake_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	concordclock "github.com/concord-chat/concord/runtime/base/clock"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestSkewedClockNeverMintsBackwards moves the default clock through the
// fault seam (runtime/base/clock) as the fault suite does on a guild
// node: 45 s back, 45 s ahead and back again. No id is ever smaller than
// one issued before; while the clock is behind the last id by more than
// MaxBackwardsWait, Next refuses at once with ErrClockBackwards.
func TestSkewedClockNeverMintsBackwards(t *testing.T) {
	t.Cleanup(func() { concordclock.SetOffset(0) })
	g, err := snowflake.New(snowflake.Config{Worker: 1, Process: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := mustNext(t, g)

	concordclock.SetOffset(-45 * time.Second)
	start := time.Now()
	for range 100 {
		if id, err := g.Next(); !errors.Is(err, snowflake.ErrClockBackwards) {
			t.Fatalf("clock 45 s back: Next = %d, %v; want ErrClockBackwards (last id %d)", id, err, a)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("refusing 100 ids took %v: Next waited for a clock 45 s behind", took)
	}

	concordclock.SetOffset(45 * time.Second)
	b := mustNext(t, g)
	if b <= a {
		t.Fatalf("clock 45 s ahead: id %d not after %d", b, a)
	}
	if ahead := time.Until(b.Time()); ahead < 44*time.Second {
		t.Fatalf("clock 45 s ahead: id time only %v ahead", ahead)
	}

	// Back to the right time: the last id is 45 s ahead of the clock.
	concordclock.SetOffset(0)
	if id, err := g.Next(); !errors.Is(err, snowflake.ErrClockBackwards) {
		t.Fatalf("clock put right after +45 s: Next = %d, %v; want ErrClockBackwards (last id %d)", id, err, b)
	}
	// Within MaxBackwardsWait of the last id, Next waits for the clock.
	concordclock.SetOffset(45*time.Second - 300*time.Millisecond)
	c := mustNext(t, g)
	if c <= b {
		t.Fatalf("clock 300 ms behind the last id: id %d not after %d", c, b)
	}
}

// TestSkewedClockConcurrent mints from several goroutines while the
// offset flips between -45 s, 0 and +45 s: every id is unique and each
// goroutine's ids increase.
func TestSkewedClockConcurrent(t *testing.T) {
	t.Cleanup(func() { concordclock.SetOffset(0) })
	g, err := snowflake.New(snowflake.Config{Worker: 2, Process: 3, MaxBackwardsWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ids := make([][]snowflake.ID, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := g.Next()
				if errors.Is(err, snowflake.ErrClockBackwards) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				ids[i] = append(ids[i], id)
			}
		}()
	}
	for _, d := range []time.Duration{-45 * time.Second, 0, 45 * time.Second, 0, -45 * time.Second, 90 * time.Second} {
		concordclock.SetOffset(d)
		time.Sleep(20 * time.Millisecond) // let the minters run under this offset
	}
	close(stop)
	wg.Wait()
	seen := map[snowflake.ID]bool{}
	total := 0
	for i, l := range ids {
		for k, id := range l {
			if seen[id] {
				t.Fatalf("id %d issued twice", id)
			}
			seen[id] = true
			if k > 0 && id <= l[k-1] {
				t.Fatalf("goroutine %d: id %d after %d", i, id, l[k-1])
			}
		}
		total += len(l)
	}
	if total == 0 {
		t.Fatal("no id minted")
	}
}
