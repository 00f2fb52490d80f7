package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// entry is one id-carrying event of a hub's ring, with its SSE frame
// encoded once for every viewer.
type entry struct {
	seq       int64
	ev        live.Event
	frame     []byte
	retracted bool // a comment taken down since
}

// hub is one subscribed stream on this gateway.
type hub struct {
	g  *Gateway
	id snowflake.ID

	// Guarded by g.mu.
	refs      int
	idleSince time.Time
	dead      bool

	ready chan struct{} // closed when loaded (err says how)
	err   error

	mu       sync.Mutex
	loading  bool
	buffered [][]byte // relay messages that arrived while loading
	ring     []*entry // ascending seq, at most live.RecentSize
	complete bool     // ring holds every event since the stream began
	last     int64    // seq of the last event applied
	state    live.StateChange
	viewers  map[*viewer]struct{}
	// fans maps an author to the local viewers' users who are the
	// author's friends (counted per connection): the gateway's friend
	// index for a sampled stream's rest tier.
	fans   map[snowflake.ID]map[snowflake.ID]int
	rx     map[int64]map[string]int64 // reaction partials by second
	rxP    map[int64]float64          // the lowest report probability the partials of a second asked for
	rxDone int64                      // last second emitted
	unsub  func()
	// nextPing is when the stream's viewers are next sent ": ping"
	// (through the flush, so one shared write per viewer, no timer per
	// viewer).
	nextPing time.Time

	// The stream's next flush (flush.go): frames applied since the last
	// one, encoded once for every viewer.
	pending      []outFrame
	pendingBytes int
	gen          uint64    // generation of the last frame added to pending
	urgent       bool      // pending holds an event (not only bookkeeping)
	lazySince    time.Time // when the first pending bookkeeping frame was queued
	lastFlush    time.Time // the last flush's start
	lastUrgent   time.Time // the start of the last flush that carried an event
	armed        bool      // flushTimer is set, or a flush is about to run
	armedFor     time.Time // when flushTimer fires
	flushing     bool      // a flush is writing outside the lock
	flushTimer   *time.Timer
	jobs         []flushJob // the last flush's list, reused by the next
}

func newHub(g *Gateway, id snowflake.ID) *hub {
	return &hub{g: g, id: id, ready: make(chan struct{}), loading: true, last: -1,
		viewers: map[*viewer]struct{}{}, rx: map[int64]map[string]int64{}}
}

// start subscribes, then loads the stream and the cache's recent events,
// then applies what arrived in between.
func (h *hub) start() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := h.load(ctx)
	if err != nil {
		h.g.mu.Lock()
		h.dead = true
		if h.refs == 0 && h.g.hubs[h.id] == h {
			delete(h.g.hubs, h.id)
		}
		h.g.mu.Unlock()
		if h.unsub != nil {
			h.unsub()
		}
	}
	h.err = err
	close(h.ready)
}

func (h *hub) load(ctx context.Context) error {
	unsub, err := h.g.d.Relay.Subscribe(ctx, h.id, h.onMessage)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	h.unsub = unsub
	h.g.m.subscribes.Inc()
	s, err := h.g.d.Store.GetStream(ctx, h.id)
	if err != nil {
		return err
	}
	h.g.m.recentReads.Inc()
	evs, err := h.g.d.Recent.Range(ctx, h.id, -1, 0, live.RecentSize)
	if err != nil {
		return fmt.Errorf("recent: %w", err)
	}
	sampled := s.Sampled
	if b := h.g.d.Board; b != nil && s.State == live.StateLive {
		// The router holds this key while the stream is sampled; without
		// it the first batch tells (Batch.Sampled).
		if v, err := b.Get(ctx, live.SampledKey(h.id)); err == nil {
			var st live.StateChange
			sampled = json.Unmarshal(v, &st) == nil && st.Sampled
		}
	}
	h.mu.Lock()
	h.state = live.StateChange{State: s.State, Sampled: sampled}
	h.complete = len(evs) < live.RecentSize
	h.applyLocked(evs)
	h.mu.Unlock()
	// Apply what arrived meanwhile, in order, before the relay's goroutine
	// may apply directly: messages keep being buffered until none is left.
	for {
		h.mu.Lock()
		buffered := h.buffered
		h.buffered = nil
		if len(buffered) == 0 {
			h.loading = false
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
		for _, msg := range buffered {
			h.process(msg)
		}
	}
}

// stop unsubscribes and cuts the hub's viewers (shutdown).
func (h *hub) stop(ctx context.Context) {
	<-h.ready
	if h.unsub != nil {
		h.unsub()
		h.g.m.unsubscribes.Inc()
	}
	if h.g.d.Board != nil {
		if err := h.g.d.Board.Delete(ctx, live.ViewersKey(h.id, h.g.cfg.Name)); err != nil {
			h.g.log.Debug("viewer report not deleted", "stream", h.id, "err", err)
		}
	}
	h.mu.Lock()
	if h.flushTimer != nil {
		h.flushTimer.Stop()
	}
	for v := range h.viewers {
		v.cutOff()
	}
	h.mu.Unlock()
}

// onMessage handles one relay message. The relay calls it from one
// goroutine per subscription, so a gap refill (a cache read) runs outside
// the lock without racing another batch of the stream.
func (h *hub) onMessage(msg []byte) {
	h.mu.Lock()
	if h.loading {
		h.buffered = append(h.buffered, msg)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.process(msg)
}

// process applies one relay message; calls are serialised (the relay's
// goroutine, or load before it hands over).
func (h *hub) process(msg []byte) {
	b, err := live.DecodeBatch(msg)
	if err != nil || b.StreamID != h.id {
		h.g.m.invalid.Inc()
		return
	}
	h.mu.Lock()
	if b.Reactions != nil {
		h.addReactionsLocked(b.Reactions)
	}
	last := h.last
	h.mu.Unlock()
	h.g.m.batches.Inc()
	if len(b.Events) == 0 {
		return
	}
	if a := b.Events[0].AcceptedAt; a > 0 {
		h.g.m.relayAge.Observe(float64(time.Now().UnixNano()-a) / 1e9)
	}
	evs := b.Events
	if b.Prev >= 0 && b.Prev > last && last >= 0 {
		// A batch was lost on the relay: refill what lies between from the
		// recent cache.
		h.g.m.gaps.Inc()
		h.g.m.recentReads.Inc()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fill, err := h.g.d.Recent.Range(ctx, h.id, last, evs[0].Seq, live.RecentSize)
		cancel()
		if err != nil {
			h.g.log.Warn("gap not refilled", "stream", h.id, "after", last, "before", evs[0].Seq, "err", err)
		}
		evs = append(fill, evs...)
	}
	h.mu.Lock()
	if h.state.State == live.StateLive && b.Sampled != h.state.Sampled {
		// The router switched the stream's mode: viewers are told before
		// the batch's comments, which are tiered by it.
		h.state.Sampled = b.Sampled
		h.addPendingLocked(outFrame{frame: stateFrame(h.state), seq: -1, acceptedAt: evs[0].AcceptedAt})
	}
	h.applyLocked(evs)
	h.mu.Unlock()
}

// applyLocked appends events above h.last to the ring and queues them to
// the viewers.
func (h *hub) applyLocked(evs []live.Event) {
	for i := range evs {
		ev := evs[i]
		if ev.Seq <= h.last {
			continue
		}
		h.last = ev.Seq
		switch ev.Kind {
		case live.KindComment:
			e := &entry{seq: ev.Seq, ev: ev, frame: commentFrame(ev.Comment)}
			f := outFrame{frame: e.frame, seq: ev.Seq, acceptedAt: ev.AcceptedAt, trace: ev.Trace}
			if ev.Comment.Shadow || ev.Tier == live.TierRest {
				// Shown to its author only: a shadow comment, or one of a
				// sampled stream's rest tier (which the ring does not keep,
				// so joins and resumes see only what everyone is shown) —
				// that one also to the author's friends watching here.
				f.onlyAuthor = ev.Comment.Author.ID
				f.restricted = true
				f.boost = !ev.Comment.Shadow
			}
			if ev.Tier != live.TierRest {
				h.pushRing(e)
			}
			h.addPendingLocked(f)
		case live.KindRetract:
			rt := ev.Retract
			target := h.find(rt.Seq)
			already := target != nil && target.retracted
			if target != nil {
				target.retracted = true
			}
			e := &entry{seq: ev.Seq, ev: ev, frame: retractFrame(ev.Seq, rt)}
			h.pushRing(e)
			if already {
				continue
			}
			h.g.m.takedown.Observe(time.Since(rt.CommentID.Time()).Seconds())
			f := outFrame{frame: e.frame, seq: ev.Seq, acceptedAt: ev.AcceptedAt, retract: rt}
			if ev.Tier == live.TierRest {
				f.restricted, f.onlyAuthor, f.boost = true, rt.AuthorID, !rt.Shadow
			}
			h.addPendingLocked(f)
		case live.KindState:
			if *ev.State == h.state {
				// Already what viewers were told on open.
				continue
			}
			h.state = *ev.State
			h.addPendingLocked(outFrame{frame: stateFrame(h.state), seq: -1, acceptedAt: ev.AcceptedAt})
		}
	}
}

func (h *hub) pushRing(e *entry) {
	h.ring = append(h.ring, e)
	if n := len(h.ring) - live.RecentSize; n > 0 {
		copy(h.ring, h.ring[n:])
		for i := len(h.ring) - n; i < len(h.ring); i++ {
			h.ring[i] = nil
		}
		h.ring = h.ring[:len(h.ring)-n]
		h.complete = false
	}
}

// find returns the ring entry at seq.
func (h *hub) find(seq int64) *entry {
	lo, hi := 0, len(h.ring)
	for lo < hi {
		m := (lo + hi) / 2
		if h.ring[m].seq < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(h.ring) && h.ring[lo].seq == seq {
		return h.ring[lo]
	}
	return nil
}

func visible(c *live.Comment, user snowflake.ID) bool {
	return !c.Shadow || (user != 0 && c.Author.ID == user)
}

// join queues the opening frames for v — the state, then either exactly
// the events missed since lastID, or (a fresh open, or a resume point
// older than the last ResumeWindow events) a gap marker and a snapshot of
// the last SnapshotSize comments — and adds it to the live flow.
func (h *hub) join(v *viewer, lastID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Frames already pending for the next flush were applied before v
	// joined: its opening below covers them.
	v.joinGen = h.gen
	v.queue(stateFrame(h.state), -1)
	if lastID >= 0 {
		v.resumeTo, v.coverFrom = lastID, lastID+1
		first := len(h.ring)
		for first > 0 && h.ring[first-1].seq > lastID {
			first--
		}
		missed := h.ring[first:]
		held := h.complete || (len(h.ring) > 0 && h.ring[0].seq <= lastID)
		if lastID >= h.last || (held && len(missed) <= live.ResumeWindow) {
			for _, e := range missed {
				switch e.ev.Kind {
				case live.KindComment:
					if !e.retracted && visible(e.ev.Comment, v.user) {
						v.queue(e.frame, e.seq)
					}
				case live.KindRetract:
					// Only for comments the viewer had before it left.
					rt := e.ev.Retract
					if rt.Seq <= lastID && ((!rt.Shadow && e.ev.Tier != live.TierRest) || rt.AuthorID == v.user) {
						v.queue(e.frame, e.seq)
					}
				}
			}
			v.lastSent = max(lastID, h.last)
			h.viewers[v] = struct{}{}
			h.g.m.resumes.Inc()
			return
		}
		snap := h.snapshotLocked(v.user, lastID)
		to := h.last
		if len(snap) > 0 {
			to = snap[0].seq
		}
		gap, _ := json.Marshal(map[string]int64{"from": lastID, "to": to})
		v.queue(sse.AppendEvent(nil, "gap", "", gap), -1)
		h.queueSnapshot(v, snap)
		h.g.m.gapsSent.Inc()
	} else {
		h.queueSnapshot(v, h.snapshotLocked(v.user, -1))
	}
	v.lastSent = max(v.lastSent, h.last)
	h.viewers[v] = struct{}{}
}

// queueSnapshot queues snap; from its first comment on, every comment
// broadcast was sent to v (for the retraction rule).
func (h *hub) queueSnapshot(v *viewer, snap []*entry) {
	v.coverFrom = h.last + 1
	if len(snap) > 0 {
		v.coverFrom = snap[0].seq
	}
	for _, e := range snap {
		v.queue(e.frame, e.seq)
	}
}

// snapshotLocked returns the newest SnapshotSize comments v may see with
// seq above after, oldest first.
func (h *hub) snapshotLocked(user snowflake.ID, after int64) []*entry {
	var out []*entry
	for i := len(h.ring) - 1; i >= 0 && len(out) < live.SnapshotSize; i-- {
		e := h.ring[i]
		if e.seq <= after {
			break
		}
		if e.ev.Kind == live.KindComment && !e.retracted && visible(e.ev.Comment, user) {
			out = append(out, e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func (h *hub) leave(v *viewer) {
	h.mu.Lock()
	delete(h.viewers, v)
	h.unfanLocked(v)
	h.mu.Unlock()
}

// fan adds v's friends to the hub's index, if v is still watching.
func (h *hub) fan(v *viewer, friends []snowflake.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.viewers[v]; !ok || v.friends != nil {
		return
	}
	if h.fans == nil {
		h.fans = map[snowflake.ID]map[snowflake.ID]int{}
	}
	v.friends = friends
	for _, a := range friends {
		m := h.fans[a]
		if m == nil {
			m = map[snowflake.ID]int{}
			h.fans[a] = m
		}
		m[v.user]++
	}
}

// unfanLocked removes v's friends from the index. h.mu is held.
func (h *hub) unfanLocked(v *viewer) {
	for _, a := range v.friends {
		m := h.fans[a]
		if m[v.user]--; m[v.user] <= 0 {
			delete(m, v.user)
		}
		if len(m) == 0 {
			delete(h.fans, a)
		}
	}
	v.friends = nil
}

func (h *hub) addReactionsLocked(rx *live.Reactions) {
	if rx.Second <= h.rxDone {
		return // already emitted: a late partial is dropped (counts are approximate)
	}
	m := h.rx[rx.Second]
	if m == nil {
		m = map[string]int64{}
		h.rx[rx.Second] = m
	}
	if p := rx.P; p > 0 && p < 1 {
		if h.rxP == nil {
			h.rxP = map[int64]float64{}
		}
		if q, ok := h.rxP[rx.Second]; !ok || p < q {
			h.rxP[rx.Second] = p
		}
	}
	for k, n := range rx.Counts {
		m[k] += n
	}
}

// reactionDelay is how long after a second ends its partials are merged:
// routers publish a completed second within a few hundred milliseconds.
const reactionDelay = time.Second

// emitReactions sends one reactions event per completed second.
func (h *hub) emitReactions(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.loading {
		return
	}
	limit := now.Add(-reactionDelay).Unix() - 1
	for sec, counts := range h.rx {
		if sec > limit {
			continue
		}
		delete(h.rx, sec)
		p, thinned := h.rxP[sec]
		delete(h.rxP, sec)
		if sec <= h.rxDone {
			continue
		}
		if !thinned {
			p = 1
		}
		if cur := h.state.ReportP; h.state.State == live.StateLive && p != cur && (cur != 0 || p != 1) {
			// The aggregator asks for another report probability: viewers
			// are told with the state event, before the counts.
			h.state.ReportP = p
			h.addPendingLocked(outFrame{frame: stateFrame(h.state), seq: -1})
		}
		data, _ := json.Marshal(live.Reactions{Second: sec, Counts: counts})
		h.addPendingLocked(outFrame{frame: sse.AppendEvent(nil, "reactions", "", data), seq: -1, lazy: true})
		if sec > h.rxDone {
			h.rxDone = sec
		}
	}
}

// pingFrame is the ": ping" comment line that keeps an idle connection
// alive through proxies.
var pingFrame = sse.AppendComment(nil, "ping")

// pingLocked queues ": ping" for every viewer when it is due, or when
// it would fall due before within (so a ping rides the same write as a
// viewers event instead of a write of its own). Every viewer gets a
// ping at least every PingInterval: one joining between two pings is
// covered by the next, less than PingInterval away. h.mu is held.
func (h *hub) pingLocked(now time.Time, within time.Duration) {
	if h.loading || len(h.viewers) == 0 {
		return
	}
	if h.nextPing.IsZero() {
		h.nextPing = now.Add(h.g.cfg.PingInterval - h.lazyHold())
	}
	if now.Add(within).Before(h.nextPing) {
		return
	}
	// The ping may wait lazyHold for a flush to ride on: queued that much
	// early, no two are more than PingInterval apart.
	h.nextPing = now.Add(h.g.cfg.PingInterval - h.lazyHold())
	h.addPendingLocked(outFrame{frame: pingFrame, seq: -1, lazy: true})
}

// ping sends ": ping" to the stream's viewers when it falls due before
// Run's next tick, so no two pings are more than PingInterval apart.
func (h *hub) ping(now time.Time) {
	h.mu.Lock()
	h.pingLocked(now, tickInterval)
	h.mu.Unlock()
}

// report writes this gateway's viewer count of the stream and sends the
// stream's total to its viewers.
func (h *hub) report(ctx context.Context, now time.Time) {
	h.mu.Lock()
	n := int64(len(h.viewers))
	loading := h.loading
	h.mu.Unlock()
	if loading {
		return
	}
	total := n
	if b := h.g.d.Board; b != nil {
		v, _ := json.Marshal(live.ViewerReport{Count: n, At: now.UnixMilli()})
		if err := b.Put(ctx, live.ViewersKey(h.id, h.g.cfg.Name), v, registry.WhileAlive); err != nil && !errors.Is(err, context.Canceled) {
			h.g.log.Warn("viewer report failed", "stream", h.id, "err", err)
		}
		if all, err := b.List(ctx, live.ViewersPrefix(h.id)); err == nil {
			total = max(live.SumViewers(all, now), n)
		}
	}
	if n == 0 {
		return
	}
	f := sse.AppendEvent(nil, "viewers", "", []byte(`{"count":`+strconv.FormatInt(total, 10)+`}`))
	h.mu.Lock()
	if len(h.viewers) > 0 {
		h.addPendingLocked(outFrame{frame: f, seq: -1, lazy: true})
		h.pingLocked(now, h.g.cfg.ReportInterval)
	}
	h.mu.Unlock()
}

func commentFrame(c *live.Comment) []byte {
	data, _ := json.Marshal(c.View())
	return sse.AppendEvent(nil, "comment", strconv.FormatInt(c.Seq, 10), data)
}

func retractFrame(seq int64, rt *live.Retraction) []byte {
	data, _ := json.Marshal(live.RetractView{CommentID: rt.CommentID, Seq: rt.Seq, Reason: rt.Reason})
	return sse.AppendEvent(nil, "retract", strconv.FormatInt(seq, 10), data)
}

func stateFrame(s live.StateChange) []byte {
	data, _ := json.Marshal(s)
	return sse.AppendEvent(nil, "state", "", data)
}
