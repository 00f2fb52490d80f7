// Package router is the live-comments stream router: a consumer group on
// the comments topic, so exactly one router owns each partition and sees
// each of its streams' events in seq order. For every stream it appends
// the events to the recent cache, batches them for up to 100 ms (a lone
// event after an idle period goes at once) and publishes one message per
// batch to the stream's relay topic. It also aggregates reaction batches
// into per-stream, per-second counts.
//
// A crashed router's successor resumes from the committed offset and
// republishes with the same seqs; the cache writes are idempotent and
// gateways drop what they already delivered. Offsets are marked only once
// everything before them is published.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
)

// Config configures a Router. Zero fields take the stated defaults.
type Config struct {
	// Topics names the event log topics (default concord.live.comments
	// and concord.live.reactions).
	Topics live.Topics
	// Group is the consumer group of the comments topic (default
	// "concord.live.router"); ReactionsGroup that of the reactions topic
	// (default "concord.live.reactions").
	Group, ReactionsGroup string
	// BatchWindow is the longest a stream's event waits (default 100 ms).
	BatchWindow time.Duration
	// EndedTTL is how long the recent cache keeps an ended stream
	// (default 24 h).
	EndedTTL time.Duration
	// Hold is the longest a sampled stream's events wait at the router
	// before they are tiered and published (default 1 s; negative: no
	// hold): a comment taken down within it (by the ML consumer, a
	// report, its creator) never reaches the sample. The moderation
	// consumer's scored marks (live.KindScored) end it early for the
	// events they cover: their verdicts are in.
	Hold time.Duration
	// ClassifierMaxLag is how far the ML moderation consumer may fall
	// behind (its board report, moderation.LagKey) before sampled streams
	// draw their sample only from trusted authors (default 1 s, the hold).
	ClassifierMaxLag time.Duration
	// Now is the clock of sampled mode: comment rates, the sample's pace
	// (default time.Now; tests inject one). Batch windows are real time.
	Now    func() time.Time
	Logger *slog.Logger
	// Registerer receives the router's metrics (nil: none).
	Registerer prometheus.Registerer
}

// Deps are the router's collaborators.
type Deps struct {
	Log    live.Consumer
	Recent live.Recent
	Relay  live.Relay
	// Board, when set, holds live.SampledKey while a stream of an owned
	// partition is sampled (lease-bound), for GET /v1/streams/{id} and
	// gateways subscribing.
	Board live.Board
}

// Router is the stream router role.
type Router struct {
	cfg Config
	d   Deps
	log *slog.Logger
	m   metrics

	// lag is the classifier's last lag report (nil: none seen).
	lag atomic.Pointer[moderation.LagReport]
}

// watchClassifier reads the classifier's lag report every second. A board
// that cannot be read keeps the last report, which turns stale and so
// counts as lagging after 5 s.
func (r *Router) watchClassifier(ctx context.Context) {
	if r.d.Board == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if v, err := r.d.Board.Get(ctx, moderation.LagKey); err == nil {
			var rep moderation.LagReport
			if json.Unmarshal(v, &rep) == nil {
				r.lag.Store(&rep)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// classifierLags reports whether sampled streams should draw only from
// trusted authors (wall clock: the report's times are).
func (r *Router) classifierLags() bool {
	return moderation.Lagging(r.lag.Load(), time.Now(), r.cfg.ClassifierMaxLag)
}

// New returns a Router.
func New(cfg Config, d Deps) (*Router, error) {
	if d.Log == nil || d.Recent == nil || d.Relay == nil {
		return nil, errors.New("live router: Log, Recent and Relay are required")
	}
	if cfg.Topics.Comments == "" {
		cfg.Topics = live.TopicsFor("concord.live.")
	}
	if cfg.Group == "" {
		cfg.Group = "concord.live.router"
	}
	if cfg.ReactionsGroup == "" {
		cfg.ReactionsGroup = "concord.live.reactions"
	}
	if cfg.BatchWindow <= 0 {
		cfg.BatchWindow = 100 * time.Millisecond
	}
	if cfg.Hold == 0 {
		cfg.Hold = time.Second
	}
	if cfg.EndedTTL <= 0 {
		cfg.EndedTTL = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ClassifierMaxLag <= 0 {
		cfg.ClassifierMaxLag = time.Second
	}
	return &Router{cfg: cfg, d: d, log: cfg.Logger.With("component", "live-router"), m: newMetrics(cfg.Registerer)}, nil
}

// Run consumes both topics until ctx ends (nil) or the log fails.
func (r *Router) Run(ctx context.Context) error {
	go r.watchClassifier(ctx)
	errs := make(chan error, 2)
	go func() {
		errs <- r.d.Log.Consume(ctx, r.cfg.Group, []string{r.cfg.Topics.Comments}, commentsHandler{r})
	}()
	go func() {
		errs <- r.d.Log.Consume(ctx, r.cfg.ReactionsGroup, []string{r.cfg.Topics.Reactions}, reactionsHandler{r})
	}()
	err := <-errs
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("live router: %w", err)
	}
	if err2 := <-errs; err == nil && err2 != nil && ctx.Err() == nil {
		return fmt.Errorf("live router: %w", err2)
	}
	return nil
}

type commentsHandler struct{ r *Router }

func (commentsHandler) Setup(context.Context, eventlog.Session) error   { return nil }
func (commentsHandler) Cleanup(context.Context, eventlog.Session) error { return nil }

// stream is the router's state of one stream of an owned partition.
type stream struct {
	id        snowflake.ID
	last      int64 // seq of the last published event
	known     bool  // last is known (else asked from the cache)
	pending   []live.Event
	feats     []*live.Features // pending[i]'s author features
	arrived   []time.Time      // when pending[i] reached the router
	smp       *sampler
	since     time.Time // when the first pending event arrived
	published time.Time
}

// ConsumeClaim runs one partition: a single goroutine owns all its
// streams' state, so nothing is locked.
func (h commentsHandler) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	r := h.r
	streams := map[snowflake.ID]*stream{}
	index := newCommentIndex()
	next := c.InitialOffset()
	// scored is the offset through which the moderation consumer has
	// scored this partition's comments (its last KindScored mark): a held
	// event at or below it has its verdict in and goes out at once.
	scored := int64(-1)
	// releasable returns how many held events at the front of st.pending
	// may go out at now and how many of them the scored mark covers: seqs
	// and arrivals both ascend, so the scored ones lead and those held
	// Hold follow.
	releasable := func(st *stream, now time.Time) (n, byScore int) {
		for byScore < len(st.pending) && st.pending[byScore].Seq <= scored {
			byScore++
		}
		n = byScore
		for n < len(st.pending) && !st.arrived[n].After(now.Add(-r.cfg.Hold)) {
			n++
		}
		return n, byScore
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// Sampled streams are looked at every second even when nothing
	// arrives, so a stream that went quiet leaves sampled mode on time.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() {
		// The next owner of the partition decides the mode afresh.
		for _, st := range streams {
			if st.smp.sampled {
				r.setSampled(context.WithoutCancel(ctx), st.id, false)
			}
		}
	}()
	mark := func() {
		m := next
		for _, st := range streams {
			if len(st.pending) > 0 && st.pending[0].Seq < m {
				m = st.pending[0].Seq
			}
		}
		s.Mark(c.Topic(), c.Partition(), m)
	}
	flushDue := func(now time.Time, all bool) {
		wake := time.Duration(-1)
		for id, st := range streams {
			if len(st.pending) == 0 {
				if now.Sub(st.published) > time.Minute && !st.smp.sampled {
					delete(streams, id)
				}
				continue
			}
			due := st.published.Add(r.cfg.BatchWindow)
			held := r.holds(st)
			if held && st.pending[0].Seq > scored {
				// The events of a sampled stream go out once they were held
				// Hold or the classifier scored them, in batches at most
				// BatchWindow apart.
				if h := st.arrived[0].Add(r.cfg.Hold); h.After(due) {
					due = h
				}
			}
			if all || !now.Before(due) {
				n := len(st.pending)
				if held {
					ready, byScore := releasable(st, now)
					if !all {
						n = ready
					}
					r.m.releasedScored.Add(float64(byScore))
					r.m.releasedHold.Add(float64(n - byScore))
				}
				r.flush(ctx, st, now, n)
				if len(st.pending) > 0 {
					if d := st.arrived[0].Add(r.cfg.Hold).Sub(now); wake < 0 || d < wake {
						wake = max(d, r.cfg.BatchWindow)
					}
				}
				continue
			}
			if d := due.Sub(now); wake < 0 || d < wake {
				wake = d
			}
		}
		if wake >= 0 {
			timer.Reset(wake)
		}
	}
	for {
		select {
		case rec, ok := <-c.Records():
			if !ok {
				flushDue(time.Now(), true)
				mark()
				return nil
			}
			next = rec.Offset + 1
			lr, err := live.DecodeLogRecord(rec.Value)
			if err != nil {
				r.m.invalid.Inc()
				r.log.Warn("skipping an invalid comments record", "partition", rec.Partition, "offset", rec.Offset, "err", err)
				mark()
				continue
			}
			if lr.Kind == live.KindScored {
				// The retractions of what it covers came before it.
				scored = max(scored, lr.Scored.Through)
				flushDue(time.Now(), false)
				mark()
				continue
			}
			switch lr.Kind {
			case live.KindComment:
				index.add(lr.Comment, rec.Offset, time.Now())
			case live.KindRetract:
				rt, ok := r.resolve(ctx, index, lr.StreamID, lr.Retract)
				if !ok {
					mark()
					continue
				}
				lr.Retract = rt
			}
			st := streams[lr.StreamID]
			if st == nil {
				st = &stream{id: lr.StreamID, smp: newSampler()}
				streams[lr.StreamID] = st
			}
			now := time.Now()
			if lr.Kind == live.KindComment && !backlog(lr, r.cfg.Now()) && st.smp.countAt(r.cfg.Now()) {
				r.setSampled(ctx, st.id, st.smp.sampled)
			}
			if lr.AcceptedAt > 0 {
				r.m.logAge.Observe(float64(now.UnixNano()-lr.AcceptedAt) / 1e9)
			}
			if len(st.pending) == 0 {
				st.since = now
			}
			if lr.Kind == live.KindRetract && r.holds(st) {
				// Taken down while held: the comment cannot enter the sample.
				st.smp.pull(lr.Retract.Seq)
			}
			st.pending = append(st.pending, lr.Event(rec.Offset))
			st.feats = append(st.feats, lr.Features)
			st.arrived = append(st.arrived, now)
			if len(st.pending) == 1 && now.Sub(st.published) >= r.cfg.BatchWindow && !r.holds(st) {
				// A lone event after an idle period goes at once.
				r.flush(ctx, st, now, 1)
			}
			flushDue(now, false)
			mark()
		case now := <-timer.C:
			flushDue(now, false)
			mark()
		case <-tick.C:
			now := r.cfg.Now()
			for _, st := range streams {
				if st.smp.sampled && st.smp.tick(now) {
					r.setSampled(ctx, st.id, st.smp.sampled)
				}
			}
		}
	}
}

// holds reports whether st's events are held before publishing (a
// sampled stream).
func (r *Router) holds(st *stream) bool { return st.smp.sampled && r.cfg.Hold > 0 }

// flush writes st's first n pending events to the recent cache and
// publishes them as one batch.
func (r *Router) flush(ctx context.Context, st *stream, now time.Time, n int) {
	if n <= 0 {
		return
	}
	evs, feats := st.pending[:n:n], st.feats[:n:n]
	if n == len(st.pending) {
		st.pending, st.feats, st.arrived = nil, nil, nil
	} else {
		st.pending = slices.Clone(st.pending[n:])
		st.feats = slices.Clone(st.feats[n:])
		st.arrived = slices.Clone(st.arrived[n:])
		st.since = st.arrived[0]
	}
	if st.smp.tick(r.cfg.Now()) {
		r.setSampled(ctx, st.id, st.smp.sampled)
	}
	for i := range evs {
		if evs[i].Kind == live.KindRetract {
			st.smp.retracted(&evs[i])
		}
	}
	if st.smp.sampled {
		trustedOnly := r.classifierLags()
		if trustedOnly {
			r.m.trustedOnly.Inc()
		}
		st.smp.tierBatch(r.cfg.Now(), evs, feats, trustedOnly)
	}
	// The recent cache (joins and refills) keeps what every viewer is
	// shown: on a sampled stream, not the rest tier.
	cached := evs
	if st.smp.sampled {
		cached = make([]live.Event, 0, len(evs))
		for _, ev := range evs {
			if ev.Tier != live.TierRest {
				cached = append(cached, ev)
			}
		}
	}
	if !st.known {
		// After a restart or a rebalance: the event before this batch is
		// the newest one the cache holds below it.
		prev, err := r.d.Recent.Range(ctx, st.id, -1, evs[0].Seq, 1)
		if err != nil {
			r.log.Warn("recent cache unavailable; batch published without prev", "stream", st.id, "err", err)
			st.last = -1
		} else if len(prev) == 1 {
			st.last = prev[0].Seq
		} else {
			st.last = -1
		}
		st.known = true
	}
	if len(cached) > 0 {
		if err := r.d.Recent.Add(ctx, st.id, cached); err != nil {
			r.m.cacheErrors.Inc()
			r.log.Warn("recent cache add failed", "stream", st.id, "err", err)
		}
	}
	for _, ev := range evs {
		switch {
		case ev.Retract != nil:
			if err := r.d.Recent.Drop(ctx, st.id, ev.Retract.Seq); err != nil {
				r.m.cacheErrors.Inc()
			}
		case ev.State != nil && ev.State.State == live.StateEnded:
			if st.smp.sampled {
				st.smp.sampled = false
				r.setSampled(ctx, st.id, false)
			}
			if err := r.d.Recent.Expire(ctx, st.id, r.cfg.EndedTTL); err != nil {
				r.m.cacheErrors.Inc()
			}
		}
	}
	spans := traceRoute(ctx, evs)
	msg, err := live.EncodeBatch(live.Batch{StreamID: st.id, Prev: st.last, Events: evs, Sampled: st.smp.sampled})
	if err != nil {
		endRoute(spans, err)
		r.log.Error("batch not encoded", "stream", st.id, "err", err)
		return
	}
	err = r.publish(ctx, st.id, msg)
	endRoute(spans, err)
	if err != nil {
		// Fire and forget: gateways see the gap on the next batch and
		// refill from the recent cache.
		r.m.publishErrors.Inc()
		r.log.Warn("relay publish failed", "stream", st.id, "err", err)
	}
	if a := evs[0].AcceptedAt; a > 0 {
		// The batch's oldest event: what its viewers waited longest for.
		r.m.acceptToPublish.Observe(float64(time.Now().UnixNano()-a) / 1e9)
	}
	if st.smp.sampled {
		for _, ev := range evs {
			if ev.Kind == live.KindComment {
				r.m.tiers.WithLabelValues(ev.Tier).Inc()
			}
		}
	}
	st.last = evs[len(evs)-1].Seq
	st.published = now
	r.m.batches.Inc()
	r.m.events.Add(float64(len(evs)))
	r.m.batchAge.Observe(now.Sub(st.since).Seconds())
}

// setSampled records a stream's mode change on the board (the API's GET
// and subscribing gateways read it; viewers learn it from the next
// batch's Sampled flag).
func (r *Router) setSampled(ctx context.Context, id snowflake.ID, sampled bool) {
	r.log.Info("stream mode", "stream", id, "sampled", sampled)
	if sampled {
		r.m.sampledStreams.Inc()
	} else {
		r.m.sampledStreams.Dec()
	}
	if r.d.Board == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if sampled {
		v, _ := json.Marshal(live.StateChange{State: live.StateLive, Sampled: true})
		err = r.d.Board.Put(ctx, live.SampledKey(id), v, registry.WhileAlive)
	} else {
		err = r.d.Board.Delete(ctx, live.SampledKey(id))
	}
	if err != nil {
		r.log.Warn("sampled mode not recorded on the board", "stream", id, "sampled", sampled, "err", err)
	}
}

// publish sends a batch of comments to the relay, counting its backbone
// copies (subscribed gateways) when the relay tells them.
func (r *Router) publish(ctx context.Context, id snowflake.ID, msg []byte) error {
	cr, ok := r.d.Relay.(live.CountingRelay)
	if !ok {
		return r.d.Relay.Publish(ctx, id, msg)
	}
	n, err := cr.PublishCount(ctx, id, msg)
	if err == nil {
		r.m.copies.Observe(float64(n))
	}
	return err
}

// backlogAge is how old a comment may be and still count toward its
// stream's rate: a log replayed from far behind (concord dev's start, a
// router catching up after an outage) is read much faster than it was
// posted and must not switch streams to sampled mode.
const backlogAge = time.Minute

// backlog reports whether lr was accepted more than backlogAge before now.
func backlog(lr live.LogRecord, now time.Time) bool {
	return lr.AcceptedAt > 0 && now.Sub(time.Unix(0, lr.AcceptedAt)) > backlogAge
}
