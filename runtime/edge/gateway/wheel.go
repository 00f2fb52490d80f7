package gateway

import (
	"sync"
	"time"
)

// The node's coarse timers (resume windows of detached sessions, heartbeat
// and identify deadlines of connections) live on one hashed timer wheel
// per node instead of a runtime timer each. Tens of thousands of sessions
// then cost one ticker wake-up per tick rather than a timer-heap operation
// on every heartbeat and every detach, and a timer costs no allocation:
// its entry is a field of the session or connection.
//
// Granularity: an entry armed for d fires at the first tick boundary at
// or after now+d, so never early and at most one tick (plus scheduling
// delay) late. The deadlines on the wheel are seconds to minutes long, so
// a tick of wheelTickMax is far below anything a client can notice.

const (
	// wheelSlots is the number of slots. An entry further than one turn
	// ahead waits in its slot for later turns (it carries its due tick).
	wheelSlots = 1024
	// wheelTickMax and wheelTickMin bound the tick; newNodeWheel picks a
	// tick a sixteenth of the shortest deadline the node arms, within
	// them, so that tests with short deadlines keep their precision.
	wheelTickMax = 250 * time.Millisecond
	wheelTickMin = 5 * time.Millisecond
)

// wheelEntry is one timer on a wheel. Its zero value is a stopped timer;
// embed it in the owner and arm it with wheel.arm. All fields are guarded
// by the wheel's mutex.
type wheelEntry struct {
	prev, next *wheelEntry
	due        int64 // tick index at which it fires
	pending    bool  // linked in a slot
	// gen counts arms and stops. The firing loop runs a callback only if
	// gen is still the one it saw when it took the entry off its slot, so
	// an entry stopped or re-armed meanwhile does not fire for its old
	// deadline.
	gen uint64
	fn  func(arg uint64)
	arg uint64
}

// wheel is a hashed timer wheel driven by one goroutine, which runs only
// while entries are armed and sleeps until the next tick whose slot holds
// an entry, so a wheel of far-off deadlines wakes rarely. Arm and stop are
// O(1).
type wheel struct {
	tick  time.Duration
	now   func() time.Time
	start time.Time

	mu      sync.Mutex
	slots   [wheelSlots]*wheelEntry // heads of doubly linked lists
	done    int64                   // last tick index processed
	count   int                     // armed entries
	running bool
	manual  bool // driven by advance calls only
	closed  bool
	quit    chan struct{}
	wake    chan struct{} // an arm due before wakeAt
	wakeAt  int64         // tick the goroutine sleeps until
	firing  []fired
}

// fired is an entry taken off its slot, with the generation it had then.
type fired struct {
	e   *wheelEntry
	gen uint64
}

// newWheel returns a wheel with the given tick and clock, driven by its
// own goroutine on the wall clock's ticker.
func newWheel(tick time.Duration, now func() time.Time) *wheel {
	return &wheel{tick: tick, now: now, start: now(), quit: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// newManualWheel returns a wheel that never starts a goroutine: the caller
// drives it with advance. Unit tests use it with a fake clock.
func newManualWheel(tick time.Duration, now func() time.Time) *wheel {
	w := newWheel(tick, now)
	w.manual = true
	return w
}

// wheelTick returns the tick for a node whose shortest wheel deadline is
// shortest.
func wheelTick(shortest time.Duration) time.Duration {
	return min(max(shortest/16, wheelTickMin), wheelTickMax)
}

// index returns the tick index t falls in.
func (w *wheel) index(t time.Time) int64 { return int64(t.Sub(w.start) / w.tick) }

// arm (re)schedules e to call fn(arg) once, d from now, replacing any
// earlier schedule of e. It starts the wheel's goroutine if it is idle and
// does nothing after close.
func (w *wheel) arm(e *wheelEntry, d time.Duration, fn func(arg uint64), arg uint64) {
	at := w.now().Add(d)
	// The first boundary at or after at: never early.
	due := int64((at.Sub(w.start) + w.tick - 1) / w.tick)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if e.pending {
		w.unlinkLocked(e)
	}
	if due <= w.done {
		due = w.done + 1
	}
	e.gen++
	e.due, e.fn, e.arg = due, fn, arg
	w.linkLocked(e)
	switch {
	case w.manual:
	case !w.running:
		w.running = true
		w.wakeAt = due
		go w.run(due)
	case due < w.wakeAt:
		w.wakeAt = due
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// stop cancels e. It reports whether it kept e from firing: false if e
// was not armed or its callback has already been taken to run.
func (w *wheel) stop(e *wheelEntry) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e.gen++
	if !e.pending {
		return false
	}
	w.unlinkLocked(e)
	return true
}

// close stops the goroutine and drops every entry; nothing fires after it
// returns, and later arms do nothing.
func (w *wheel) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	close(w.quit)
	for i, e := range w.slots {
		for e != nil {
			next := e.next
			e.prev, e.next, e.pending = nil, nil, false
			e.gen++
			e = next
		}
		w.slots[i] = nil
	}
	w.count = 0
}

func (w *wheel) linkLocked(e *wheelEntry) {
	i := e.due % wheelSlots
	e.prev, e.next = nil, w.slots[i]
	if e.next != nil {
		e.next.prev = e
	}
	w.slots[i] = e
	e.pending = true
	w.count++
}

func (w *wheel) unlinkLocked(e *wheelEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		w.slots[e.due%wheelSlots] = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next, e.pending = nil, nil, false
	w.count--
}

// run is the wheel's goroutine: it sleeps until the next tick with an
// entry in its slot (or an earlier arm wakes it), advances the wheel, and
// exits when no entry is armed (arm starts it again) or on close.
func (w *wheel) run(first int64) {
	t := time.NewTimer(w.until(first))
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-w.wake:
		case <-t.C:
		}
		if !w.advance(w.now()) {
			return
		}
		w.mu.Lock()
		next := w.nextLocked()
		w.wakeAt = next
		w.mu.Unlock()
		t.Reset(w.until(next))
	}
}

// until returns how long from now tick k begins.
func (w *wheel) until(k int64) time.Duration {
	return max(w.start.Add(time.Duration(k)*w.tick).Sub(w.now()), 0)
}

// nextLocked returns the first tick after the last one processed whose
// slot holds an entry (a turn ahead if none does; the entry there may be
// due in a later turn, and the goroutine then sleeps again). w.mu must be
// held.
func (w *wheel) nextLocked() int64 {
	for k := w.done + 1; k <= w.done+wheelSlots; k++ {
		if w.slots[k%wheelSlots] != nil {
			return k
		}
	}
	return w.done + wheelSlots
}

// advance fires every entry due at or before now's tick, callbacks outside
// the lock in slot order. It reports whether entries remain armed; when
// none do, it marks the goroutine stopped (the caller is the goroutine or
// a test driving the wheel by hand).
func (w *wheel) advance(now time.Time) bool {
	target := w.index(now)
	w.mu.Lock()
	batch := w.firing[:0]
	if target > w.done {
		// Visit the slots of the ticks since the last advance, each once:
		// after a long pause every slot, since an entry can only be in the
		// slot of its due tick.
		last := min(target, w.done+wheelSlots)
		for k := w.done + 1; k <= last; k++ {
			for e := w.slots[k%wheelSlots]; e != nil; {
				next := e.next
				if e.due <= target {
					w.unlinkLocked(e)
					batch = append(batch, fired{e, e.gen})
				}
				e = next
			}
		}
		w.done = target
	}
	w.firing = nil // batch is ours until we hand it back
	w.mu.Unlock()
	for i, f := range batch {
		w.mu.Lock()
		run := f.e.gen == f.gen && !f.e.pending && !w.closed
		fn, arg := f.e.fn, f.e.arg
		w.mu.Unlock()
		if run {
			fn(arg)
		}
		batch[i] = fired{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.firing = batch[:0]
	if w.count == 0 || w.closed {
		w.running = false
		return false
	}
	return true
}
