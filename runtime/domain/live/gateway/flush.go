package gateway

import (
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// A stream's viewers are flushed together, by the hub: frames applied from relay batches (comments, retractions,
// state, reactions, viewer counts) wait in the hub's pending list, and one
// flush concatenates them once into a shared buffer and writes that same
// buffer to every viewer entitled to all of it. Only a viewer that may
// not see one of the frames (a shadow comment, a retraction of a comment
// it was never sent, a frame older than its join) gets a buffer of its
// own. A detached HTTP/1.1 viewer with nothing queued privately is written
// straight from the flush with a non-blocking write; what the socket does
// not take is queued for that viewer's writer goroutine, which then paces
// it like any slow viewer. So a batch to ten thousand viewers costs one
// encoding, one concatenation and ten thousand write calls spread over the
// flush workers, with no goroutine, timer or buffer per viewer.
//
// The stream's events (comments, retractions, state) are what viewers
// wait for; viewer counts, pings and reaction counts are bookkeeping that
// can wait a little. So a flush that carried only bookkeeping does not
// hold back the next event: a lone comment after a quiet period is
// written at once even if a viewers event went out just before it
// (otherwise one comment in twenty, at one viewers event per 5 s, waited
// up to 250 ms). Bookkeeping frames in turn wait up to lazyHold for an
// event's flush to ride on (on a busy stream they never cost a write of
// their own), and a flush of them alone keeps FlushInterval from the
// flush before.
//
// When events are written depends on how fast they come. An event that
// arrives when the stream's last event flush is at least QuietGap
// (150 ms) old is written at once: at that pace batching would save at
// most a fifth of the writes (4 instead of 5 a second at one comment per
// 200 ms) and cost each comment up to 250 ms. An event that arrives
// sooner waits until FlushInterval (250 ms) after that flush, and whatever
// else arrives meanwhile rides along. So a stream whose events come
// faster than QuietGap apart (the router's batches back to back, 100 ms
// apart) is flushed every FlushInterval, four writes a second per viewer
// however many comments it carries, and any stream costs a viewer at most
// one write per QuietGap.

// outFrame is one frame of a hub's next flush.
type outFrame struct {
	gen        uint64 // hub generation; a viewer joined at or after it skips it
	frame      []byte
	seq        int64 // the event's id, -1 for frames without one
	acceptedAt int64 // Unix ns the API accepted the event, 0 unknown
	restricted bool  // a shadow comment: only onlyAuthor sees it
	lazy       bool  // bookkeeping (viewers, ping, reactions): may wait for an event's flush
	onlyAuthor snowflake.ID
	retract    *live.Retraction // to viewers that were sent rt.Seq
	// boost: a sampled stream's rest-tier comment (or its retraction),
	// shown to its author and to local viewers who are the author's
	// friends; fans is the author's entry of the hub's index, taken at
	// the flush.
	boost bool
	fans  map[snowflake.ID]int
	// trace is a sampled comment's traceparent (live.Event.Trace).
	trace string
}

// addPendingLocked queues f for the stream's next flush and arms it. h.mu
// is held. A stream whose pending bytes pass MaxPending between two
// flushes would queue more than that for every viewer: they are cut, as a
// viewer with that much queued privately would be. Only frames every
// viewer is sent count: a restricted frame (a shadow comment, a sampled
// stream's rest tier) goes to its author and the author's friends, so
// the rest tier of a 5,000 comments/s flood — a megabyte a second that
// no viewer is sent more than a few frames of — must not cut viewers
// who are each shown ten comments a second (it did, every one of them:
// test/live TestBenchFlood).
func (h *hub) addPendingLocked(f outFrame) {
	h.gen++
	f.gen = h.gen
	if f.lazy {
		if h.lazySince.IsZero() {
			h.lazySince = h.now()
		}
	} else {
		h.urgent = true
	}
	h.pending = append(h.pending, f)
	if !f.restricted {
		h.pendingBytes += len(f.frame)
	}
	if h.pendingBytes > h.g.cfg.MaxPending {
		for v := range h.viewers {
			select {
			case <-v.cut:
			default:
				if f.gen > v.joinGen {
					h.g.m.slowCut.Inc()
					v.cutOff()
				}
			}
		}
	}
	h.armLocked()
}

// lazyHold is the longest a bookkeeping frame waits for an event's flush
// to ride on (shorter when the gateway's report or ping interval is).
func (h *hub) lazyHold() time.Duration {
	c := h.g.cfg
	return min(maxLazyHold, c.ReportInterval/2, c.PingInterval/2)
}

// maxLazyHold bounds lazyHold: viewer counts and reactions arrive at most
// a second late, pings stay within PingInterval (pingLocked queues them
// that much early).
const maxLazyHold = time.Second

// flushDueLocked is when the pending frames may be written: with an
// event among them, at once if the last flush that carried one is
// QuietGap old, else FlushInterval after it (bookkeeping flushes since do
// not count); with
// bookkeeping only, lazyHold after the first of it was queued, and never
// within FlushInterval of any flush.
func (h *hub) flushDueLocked() time.Time {
	if h.urgent {
		c := h.g.cfg
		if quiet := h.lastUrgent.Add(c.QuietGap); !h.now().Before(quiet) {
			// Batching buys nothing here: the events come further apart
			// than QuietGap, and writing each at once costs at most
			// FlushInterval/QuietGap times the writes of batching it.
			return quiet
		}
		return h.lastUrgent.Add(c.FlushInterval)
	}
	due := h.lazySince.Add(h.lazyHold())
	if any := h.lastFlush.Add(h.g.cfg.FlushInterval); any.After(due) {
		due = any
	}
	return due
}

// armLocked schedules the next flush at flushDueLocked, or earlier than
// it was armed for (an event joined bookkeeping that was waiting).
func (h *hub) armLocked() {
	if h.flushing || len(h.pending) == 0 {
		return
	}
	due := h.flushDueLocked()
	if h.armed && !due.Before(h.armedFor) {
		return
	}
	h.armed, h.armedFor = true, due
	wait := max(due.Sub(h.now()), 0)
	if h.flushTimer == nil {
		h.flushTimer = time.AfterFunc(wait, h.flush)
	} else {
		h.flushTimer.Reset(wait)
	}
}

// now is the gateway's clock (tests set Gateway.now).
func (h *hub) now() time.Time {
	if h.g.now != nil {
		return h.g.now()
	}
	return time.Now()
}

// flushJob is one viewer's part of a flush.
type flushJob struct {
	v   *viewer
	buf []byte
}

// flushChunk is how many viewers one flush goroutine writes. Each write
// is a syscall (on loopback or a busy NIC, most of a delivery's CPU is
// the kernel's), and on a loaded machine the OS preempts threads inside
// write(2). The Go runtime then hands that thread's P to another thread,
// but the flush only goes on there if another of its goroutines is
// runnable: with one goroutine per core, a preempted thread stalled its
// whole share of the viewers (at a load average of 20–30, comments
// reached 5,000 viewers' sockets 0.56 s after the gateway had them, on
// average, for about 85 ms of CPU per flush; in chunks, 0.12–0.16 s).
// Small chunks keep the rest of the flush running while a thread is off
// its core, and a goroutine per chunk costs far less than its 64 writes.
const flushChunk = 64

// maxFlushWorkers bounds a flush's goroutines; past it chunks grow.
const maxFlushWorkers = 128

// flush writes the pending frames to the hub's viewers.
func (h *hub) flush() {
	h.mu.Lock()
	if h.armed && h.now().Before(h.armedFor) {
		// A stale call (the timer fired, then was reset before this ran):
		// the timer is set for armedFor.
		h.mu.Unlock()
		return
	}
	h.armed = false
	if len(h.pending) == 0 {
		h.mu.Unlock()
		return
	}
	h.flushing = true
	h.lastFlush = h.now()
	urgent := h.urgent
	if urgent {
		h.lastUrgent = h.lastFlush
	}
	pend := h.pending
	h.pending, h.pendingBytes = nil, 0
	h.urgent, h.lazySince = false, time.Time{}
	// The shared buffer holds the frames every viewer may be shown; the
	// restricted ones (shadow comments, a sampled stream's rest tier)
	// are indexed by the one viewer user they are for, so a flush of a
	// sampled stream carrying hundreds of rest comments still costs most
	// viewers one map lookup, not a pass over every frame.
	var shared []byte
	var oldest int64
	var sharedLast int64 = -1
	sharedComments, sharedRemoved := 0, 0
	var personal map[snowflake.ID]bool
	for i := range pend {
		f := &pend[i]
		if a := f.acceptedAt; a > 0 && (oldest == 0 || a < oldest) {
			oldest = a
		}
		if f.restricted {
			if personal == nil {
				personal = map[snowflake.ID]bool{}
			}
			personal[f.onlyAuthor] = true
			if f.boost {
				f.fans = h.fans[f.onlyAuthor]
				for u := range f.fans {
					personal[u] = true
				}
			}
			continue
		}
		shared = append(shared, f.frame...)
		sharedLast = max(sharedLast, f.seq)
		switch {
		case f.retract != nil:
			sharedRemoved++
		case f.seq >= 0:
			sharedComments++
		}
	}
	// The job list is the hub's, reused: flushes of one hub never overlap.
	jobs := h.jobs[:0]
	var shown, removed int
	for v := range h.viewers {
		b, all := v.framesFor(pend, shared, sharedLast, v.user != 0 && personal[v.user])
		if all {
			shown, removed = shown+sharedComments, removed+sharedRemoved
		} else {
			s, r := countShown(pend, v)
			shown, removed = shown+s, removed+r
		}
		if len(b) > 0 {
			jobs = append(jobs, flushJob{v: v, buf: b})
		}
	}
	h.mu.Unlock()
	if shown > 0 {
		h.g.m.impressions.Add(float64(shown))
	}
	if removed > 0 {
		h.g.m.removedImpressions.Add(float64(removed))
	}

	spans := traceWrites(pend, len(jobs))
	h.writeJobs(jobs, oldest, urgent)
	endSpans(spans)
	if oldest > 0 && len(jobs) > 0 {
		h.g.m.flushDone.WithLabelValues(sizeLabel(len(jobs))).Observe(float64(time.Now().UnixNano()-oldest) / 1e9)
	}

	clear(jobs) // keep no viewer or buffer alive through the reused slice
	h.mu.Lock()
	h.jobs = jobs[:0]
	h.flushing = false
	if len(h.pending) > 0 {
		h.armLocked()
	}
	h.mu.Unlock()
}

// writeJobs delivers a flush's jobs (urgent: they carry an event, not
// only bookkeeping): inline when they are few, else in chunks of
// flushChunk on goroutines of their own.
func (h *hub) writeJobs(jobs []flushJob, oldest int64, urgent bool) {
	queued := h.lastFlush
	if len(jobs) <= flushChunk {
		sw := newSockWriter()
		for _, j := range jobs {
			j.v.deliver(j.buf, oldest, queued, urgent, h.g, sw)
		}
		return
	}
	chunk := max(flushChunk, (len(jobs)+maxFlushWorkers-1)/maxFlushWorkers)
	var wg sync.WaitGroup
	for lo := 0; lo < len(jobs); lo += chunk {
		part := jobs[lo:min(lo+chunk, len(jobs))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw := newSockWriter()
			for _, j := range part {
				j.v.deliver(j.buf, oldest, queued, urgent, h.g, sw)
			}
		}()
	}
	wg.Wait()
}

// framesFor returns what of pend goes to v — shared itself (the
// unrestricted frames, the last with seq sharedLast) when v gets exactly
// those — and advances v.lastSent. mine says a restricted frame of pend
// is for v's user. The hub's lock is held.
func (v *viewer) framesFor(pend []outFrame, shared []byte, sharedLast int64, mine bool) (buf []byte, all bool) {
	all = !mine
	for i := 0; all && i < len(pend); i++ {
		if f := &pend[i]; !f.restricted && !v.wants(f) {
			all = false
		}
	}
	if all {
		v.lastSent = max(v.lastSent, sharedLast)
		return shared, true
	}
	var out []byte
	for i := range pend {
		f := &pend[i]
		if !v.wants(f) {
			continue
		}
		out = append(out, f.frame...)
		if f.seq > v.lastSent {
			v.lastSent = f.seq
		}
		v.flushed = append(v.flushed, i)
	}
	return out, false
}

// countShown counts, of the frames framesFor just gave v (v.flushed), the
// comments (impressions) and the retractions of comments v had been shown
// (impressions of a comment later removed), and forgets the list.
func countShown(pend []outFrame, v *viewer) (shown, removed int) {
	for _, i := range v.flushed {
		f := &pend[i]
		switch {
		case f.retract != nil:
			removed++
		case f.seq >= 0:
			shown++
		}
	}
	v.flushed = v.flushed[:0]
	return shown, removed
}

// wants reports whether frame f goes to v.
func (v *viewer) wants(f *outFrame) bool {
	if f.gen <= v.joinGen || (f.seq >= 0 && f.seq <= v.lastSent) {
		return false
	}
	if f.restricted && (v.user == 0 || (v.user != f.onlyAuthor && f.fans[v.user] == 0)) {
		return false
	}
	if rt := f.retract; rt != nil && !v.wasSent(rt.Seq, rt.AuthorID, rt.Shadow) {
		return false
	}
	return true
}
