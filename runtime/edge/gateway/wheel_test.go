package gateway

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// firings records callback arguments.
type firings struct {
	mu   sync.Mutex
	args []uint64
}

func (f *firings) fn(arg uint64) {
	f.mu.Lock()
	f.args = append(f.args, arg)
	f.mu.Unlock()
}

func (f *firings) take() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.args
	f.args = nil
	return a
}

func newTestWheel() (*wheel, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return newManualWheel(time.Second, clk.now), clk
}

func TestWheelFiresOnceNotEarly(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	var e wheelEntry
	w.arm(&e, 10*time.Second, f.fn, 7)
	w.advance(clk.add(9 * time.Second))
	if got := f.take(); len(got) != 0 {
		t.Fatalf("fired %v before its deadline", got)
	}
	if more := w.advance(clk.add(time.Second)); more {
		t.Fatal("advance reports armed entries after the only one fired")
	}
	if got := f.take(); len(got) != 1 || got[0] != 7 {
		t.Fatalf("fired %v, want [7]", got)
	}
	w.advance(clk.add(wheelSlots * time.Second)) // a full turn later
	if got := f.take(); len(got) != 0 {
		t.Fatalf("fired again: %v", got)
	}
	if w.stop(&e) {
		t.Fatal("stop of a fired entry reports it prevented firing")
	}
}

func TestWheelOffBoundaryFiresWithinOneTick(t *testing.T) {
	w, clk := newTestWheel()
	clk.add(300 * time.Millisecond) // arm between boundaries
	var f firings
	var e wheelEntry
	w.arm(&e, 2*time.Second, f.fn, 1) // deadline +2.3 s
	w.advance(clk.add(1900 * time.Millisecond))
	if got := f.take(); len(got) != 0 {
		t.Fatalf("fired %v at +2.2 s, before the +2.3 s deadline", got)
	}
	w.advance(clk.add(800 * time.Millisecond)) // +3.0 s: the next boundary
	if got := f.take(); len(got) != 1 {
		t.Fatalf("fired %v at the first boundary after the deadline, want one", got)
	}
}

func TestWheelStopPrevents(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	var e wheelEntry
	w.arm(&e, 5*time.Second, f.fn, 1)
	if !w.stop(&e) {
		t.Fatal("stop of an armed entry reports nothing to prevent")
	}
	if more := w.advance(clk.add(time.Minute)); more {
		t.Fatal("stopped entry still counted")
	}
	if got := f.take(); len(got) != 0 {
		t.Fatalf("stopped entry fired: %v", got)
	}
}

func TestWheelRearmMoves(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	var e wheelEntry
	w.arm(&e, 5*time.Second, f.fn, 1)
	w.advance(clk.add(3 * time.Second))
	w.arm(&e, 5*time.Second, f.fn, 2) // now due at +8 s
	w.advance(clk.add(3 * time.Second))
	if got := f.take(); len(got) != 0 {
		t.Fatalf("re-armed entry fired for its old deadline: %v", got)
	}
	w.advance(clk.add(2 * time.Second))
	if got := f.take(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("fired %v, want the re-armed [2]", got)
	}
	// Re-arming earlier works too.
	w.arm(&e, time.Hour, f.fn, 3)
	w.arm(&e, time.Second, f.fn, 4)
	w.advance(clk.add(time.Second))
	if got := f.take(); len(got) != 1 || got[0] != 4 {
		t.Fatalf("fired %v, want [4]", got)
	}
}

func TestWheelRearmDuringFiringIsNotStale(t *testing.T) {
	// Entry a's callback re-arms entry b, which was due in the same
	// advance and already taken off its slot: b must not fire for its old
	// deadline, only for the new one.
	w, clk := newTestWheel()
	var f firings
	var a, b wheelEntry
	// Entries are pushed at the head of their slot's list, so a (armed
	// last) runs first.
	w.arm(&b, time.Second, f.fn, 1)
	w.arm(&a, time.Second, func(uint64) { w.arm(&b, 10*time.Second, f.fn, 2) }, 0)
	w.advance(clk.add(time.Second))
	if got := f.take(); len(got) != 0 {
		t.Fatalf("b fired %v for the deadline it was re-armed away from", got)
	}
	w.advance(clk.add(10 * time.Second))
	if got := f.take(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("fired %v, want [2]", got)
	}
}

func TestWheelManyInOneSlot(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	const n = 1000
	es := make([]wheelEntry, n)
	for i := range es {
		w.arm(&es[i], 3*time.Second, f.fn, uint64(i))
	}
	// Stop every third one, from the middle of the slot's list too.
	stopped := 0
	for i := 0; i < n; i += 3 {
		w.stop(&es[i])
		stopped++
	}
	w.advance(clk.add(3 * time.Second))
	got := f.take()
	if len(got) != n-stopped {
		t.Fatalf("fired %d, want %d", len(got), n-stopped)
	}
	seen := make(map[uint64]bool, len(got))
	for _, a := range got {
		if a%3 == 0 || seen[a] {
			t.Fatalf("entry %d fired (stopped or twice)", a)
		}
		seen[a] = true
	}
}

func TestWheelLaterTurnsAndLongPause(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	var near, far wheelEntry
	// far shares near's slot one turn later.
	w.arm(&near, 2*time.Second, f.fn, 1)
	w.arm(&far, (2+wheelSlots)*time.Second, f.fn, 2)
	w.advance(clk.add(2 * time.Second))
	if got := f.take(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("fired %v, want [1] only", got)
	}
	// A pause longer than a turn: the wheel catches up in one advance.
	w.advance(clk.add(3 * wheelSlots * time.Second))
	if got := f.take(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("fired %v after the pause, want [2]", got)
	}
}

func TestWheelClose(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	var e, late wheelEntry
	w.arm(&e, time.Second, f.fn, 1)
	w.close()
	w.arm(&late, time.Second, f.fn, 2)
	if more := w.advance(clk.add(time.Minute)); more {
		t.Fatal("closed wheel reports armed entries")
	}
	if got := f.take(); len(got) != 0 {
		t.Fatalf("closed wheel fired %v", got)
	}
}

func TestWheelGoroutineFiresAndStops(t *testing.T) {
	// The driven wheel on the wall clock: an armed entry fires (awaited
	// on a channel), and the goroutine ends once nothing is armed.
	w := newWheel(wheelTickMin, time.Now)
	defer w.close()
	done := make(chan uint64, 1)
	var e wheelEntry
	w.arm(&e, 10*time.Millisecond, func(a uint64) { done <- a }, 9)
	select {
	case a := <-done:
		if a != 9 {
			t.Fatalf("fired with %d", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("driven wheel never fired")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("wheel goroutine still running with nothing armed")
		}
		time.Sleep(wheelTickMin) // polling a state with no event to await
	}
	// It starts again on the next arm.
	w.arm(&e, 10*time.Millisecond, func(a uint64) { done <- a }, 10)
	select {
	case a := <-done:
		if a != 10 {
			t.Fatalf("fired with %d", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("restarted wheel never fired")
	}
}

func TestWheelNextSkipsEmptySlots(t *testing.T) {
	w, clk := newTestWheel()
	var f firings
	var near, far wheelEntry
	w.arm(&far, 100*time.Second, f.fn, 2)
	w.arm(&near, 5*time.Second, f.fn, 1)
	w.mu.Lock()
	next := w.nextLocked()
	w.mu.Unlock()
	if next != 5 {
		t.Fatalf("next tick %d, want 5", next)
	}
	w.advance(clk.add(5 * time.Second))
	w.mu.Lock()
	next = w.nextLocked()
	w.mu.Unlock()
	if next != 100 {
		t.Fatalf("next tick after the first fired %d, want 100", next)
	}
	w.stop(&far)
	w.mu.Lock()
	next = w.nextLocked()
	w.mu.Unlock()
	if next != 5+wheelSlots {
		t.Fatalf("next tick of an empty wheel %d, want a turn ahead (%d)", next, 5+wheelSlots)
	}
}

func TestWheelEarlierArmWakesSleepingDriver(t *testing.T) {
	// The goroutine sleeps until its only entry, an hour away; a nearer
	// arm must wake it rather than wait for that hour.
	w := newWheel(wheelTickMin, time.Now)
	defer w.close()
	var far, near wheelEntry
	w.arm(&far, time.Hour, func(uint64) {}, 0)
	done := make(chan struct{})
	w.arm(&near, 10*time.Millisecond, func(uint64) { close(done) }, 0)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a nearer arm did not wake the wheel sleeping until a far entry")
	}
}
