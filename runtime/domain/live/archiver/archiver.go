// Package archiver is the live-comments archiver: its own consumer group
// on the comments topic, writing every comment to the comments store and
// applying every retraction as a soft delete with its reason. A record is
// marked only once the store acknowledged it, so a restart re-writes at
// most the uncommitted tail (the writes are idempotent by seq).
package archiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/logbatch"
)

// Config configures an Archiver.
type Config struct {
	// Topics names the event log topics (default concord.live.*).
	Topics live.Topics
	// Group is the consumer group (default "concord.live.archiver").
	Group string
	// MaxBatch bounds the comments written in one store call (default 256).
	MaxBatch int
	Logger   *slog.Logger
	// Registerer receives the archiver's metrics (nil: none).
	Registerer prometheus.Registerer
	// ShardCheck is how often the routers' sampled marks are listed
	// from the board (default 5s): a stream the router turns sampled is
	// written with live.SampledShards within this long.
	ShardCheck time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Deps are the archiver's collaborators.
type Deps struct {
	Log   live.Consumer
	Store live.Store
	// Board, when set, is where the router holds live.SampledKey while a
	// stream is sampled: the archiver then writes the stream's comments
	// over live.SampledShards store partitions, so a hot stream's
	// comments do not all land in one. Nil: only a stream record marked
	// sampled gets them.
	Board live.Board
}

// Archiver is the archiver role.
type Archiver struct {
	cfg                       Config
	d                         Deps
	log                       *slog.Logger
	written, retracted, stale prometheus.Counter
	// refused are unresolved takedowns that did not apply.
	refused prometheus.Counter

	// shardCache is each stream's store shard count, forgotten when its
	// state changes.
	mu         sync.Mutex
	shardCache map[snowflake.ID]int
	// sampled are the streams with a sampled mark on the board, as
	// listed at sampledAt.
	sampled   map[snowflake.ID]bool
	sampledAt time.Time
}

// New returns an Archiver.
func New(cfg Config, d Deps) (*Archiver, error) {
	if d.Log == nil || d.Store == nil {
		return nil, errors.New("live archiver: Log and Store are required")
	}
	if cfg.Topics.Comments == "" {
		cfg.Topics = live.TopicsFor("concord.live.")
	}
	if cfg.Group == "" {
		cfg.Group = "concord.live.archiver"
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShardCheck <= 0 {
		cfg.ShardCheck = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Archiver{cfg: cfg, d: d, log: cfg.Logger.With("component", "live-archiver"), shardCache: map[snowflake.ID]int{},
		written:   prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_comments_written_total", Help: "Comments written to the store."}),
		retracted: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_retractions_total", Help: "Soft deletes applied."}),
		stale:     prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_skipped_records_total", Help: "Records skipped (undecodable, or retracting an unknown comment)."}),
		refused:   prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_takedowns_refused_total", Help: "Unresolved takedowns not applied: the one who asked neither wrote the comment nor moderates the stream."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(a.written, a.retracted, a.stale, a.refused)
	}
	return a, nil
}

// Run consumes until ctx ends (nil) or the log fails.
func (a *Archiver) Run(ctx context.Context) error {
	h := logbatch.Handler[live.LogRecord]{MaxBatch: a.cfg.MaxBatch, Sort: a.sort, Flush: a.write, Apply: a.apply}
	if err := a.d.Log.Consume(ctx, a.cfg.Group, []string{a.cfg.Topics.Comments}, h); err != nil && ctx.Err() == nil {
		return fmt.Errorf("live archiver: %w", err)
	}
	return nil
}

// sort batches comments (with their seq) and applies retractions and
// stream state changes one at a time, after the comments before them.
func (a *Archiver) sort(rec eventlog.Record) (logbatch.Step, live.LogRecord) {
	lr, err := live.DecodeLogRecord(rec.Value)
	if err != nil {
		a.stale.Inc()
		return logbatch.Skip, lr
	}
	switch lr.Kind {
	case live.KindComment:
		lr.Comment = lr.Event(rec.Offset).Comment
		return logbatch.Add, lr
	case live.KindRetract, live.KindState:
		return logbatch.Apply, lr
	}
	return logbatch.Skip, lr
}

// write stores a batch of comments, by the store shards of their streams.
func (a *Archiver) write(ctx context.Context, _ int32, batch []live.LogRecord) error {
	byShards := map[int][]live.Comment{}
	for _, lr := range batch {
		n := a.shards(ctx, lr.StreamID)
		byShards[n] = append(byShards[n], *lr.Comment)
	}
	for n, cs := range byShards {
		if err := a.retry(ctx, func() error { return a.d.Store.PutComments(ctx, n, cs) }); err != nil {
			return err
		}
	}
	a.written.Add(float64(len(batch)))
	return nil
}

// apply soft-deletes a retracted comment, or forgets a stream's shard
// count when its state changes (it may have become sampled).
func (a *Archiver) apply(ctx context.Context, _ int32, _ eventlog.Record, lr live.LogRecord) error {
	if lr.Kind == live.KindState {
		a.mu.Lock()
		delete(a.shardCache, lr.StreamID)
		a.mu.Unlock()
		return nil
	}
	rt := lr.Retract
	if rt.Request != nil {
		// Appended before its comment was readable (live.TakedownRequest):
		// the comment is before it on this partition, so written by now.
		var c live.Comment
		err := a.retry(ctx, func() (err error) { c, err = a.d.Store.GetComment(ctx, lr.StreamID, rt.CommentID); return err })
		if errors.Is(err, live.ErrNotFound) {
			a.stale.Inc()
			return nil
		}
		if err != nil {
			return err
		}
		if c.Retracted {
			// Taken down already (and its reason kept).
			return nil
		}
		res, ok := rt.Resolve(c)
		if !ok {
			a.refused.Inc()
			return nil
		}
		rt = &res
	}
	err := a.retry(ctx, func() error { return a.d.Store.Retract(ctx, lr.StreamID, rt.CommentID, rt.Reason) })
	switch {
	case errors.Is(err, live.ErrNotFound):
		a.stale.Inc()
	case err != nil:
		return err
	default:
		a.retracted.Inc()
	}
	return nil
}

// shards returns the store shard count of a stream: live.SampledShards
// while the router holds the stream sampled (its board mark) or its record
// says so, else 1. The marks are listed once per ShardCheck (few streams
// are sampled; one read for them all, not one per stream); a list that
// fails keeps the last one. A mark missed only costs the hot partition's
// spread: a bucket lists every shard count it was written with.
func (a *Archiver) shards(ctx context.Context, id snowflake.ID) int {
	if a.sampledNow(ctx)[id] {
		return live.SampledShards
	}
	a.mu.Lock()
	n, ok := a.shardCache[id]
	a.mu.Unlock()
	if ok {
		return n
	}
	n = 1
	if s, err := a.d.Store.GetStream(ctx, id); err == nil && s.Sampled {
		n = live.SampledShards
	}
	a.mu.Lock()
	if len(a.shardCache) > 100_000 {
		a.shardCache = map[snowflake.ID]int{}
	}
	a.shardCache[id] = n
	a.mu.Unlock()
	return n
}

// sampledNow returns the streams the routers hold sampled, listed from
// the board at most once per ShardCheck.
func (a *Archiver) sampledNow(ctx context.Context) map[snowflake.ID]bool {
	if a.d.Board == nil {
		return nil
	}
	now := a.cfg.Now()
	a.mu.Lock()
	if !a.sampledAt.IsZero() && now.Sub(a.sampledAt) < a.cfg.ShardCheck {
		set := a.sampled
		a.mu.Unlock()
		return set
	}
	a.mu.Unlock()
	kv, err := a.d.Board.List(ctx, live.SampledPrefix)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sampledAt = now
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("sampled marks not read; keeping the last list", "err", err)
		}
		return a.sampled
	}
	set := make(map[snowflake.ID]bool, len(kv))
	for k := range kv {
		if id, err := snowflake.Parse(strings.TrimPrefix(k, live.SampledPrefix)); err == nil {
			set[id] = true
		}
	}
	a.sampled = set
	return set
}

// retry runs f until it succeeds, fails with something other than
// ErrUnavailable, or ctx ends: the store being down must not skip records.
func (a *Archiver) retry(ctx context.Context, f func() error) error {
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := f()
		if err == nil || !errors.Is(err, live.ErrUnavailable) {
			return err
		}
		a.log.Warn("comments store unavailable; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}
