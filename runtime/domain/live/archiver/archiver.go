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
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
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
}

// Deps are the archiver's collaborators.
type Deps struct {
	Log   live.Consumer
	Store live.Store
}

// Archiver is the archiver role.
type Archiver struct {
	cfg                       Config
	d                         Deps
	log                       *slog.Logger
	written, retracted, stale prometheus.Counter
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
	a := &Archiver{cfg: cfg, d: d, log: cfg.Logger.With("component", "live-archiver"),
		written:   prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_comments_written_total", Help: "Comments written to the store."}),
		retracted: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_retractions_total", Help: "Soft deletes applied."}),
		stale:     prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_archiver_skipped_records_total", Help: "Records skipped (undecodable, or retracting an unknown comment)."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(a.written, a.retracted, a.stale)
	}
	return a, nil
}

// Run consumes until ctx ends (nil) or the log fails.
func (a *Archiver) Run(ctx context.Context) error {
	if err := a.d.Log.Consume(ctx, a.cfg.Group, []string{a.cfg.Topics.Comments}, handler{a}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("live archiver: %w", err)
	}
	return nil
}

type handler struct{ a *Archiver }

func (handler) Setup(context.Context, eventlog.Session) error   { return nil }
func (handler) Cleanup(context.Context, eventlog.Session) error { return nil }

// ConsumeClaim writes a partition's records in order: comments in batches
// of what is already waiting, each retraction after the comments before
// it.
func (h handler) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	a := h.a
	shards := map[snowflake.ID]int{}
	var batch []live.Comment
	var next int64 = -1
	flush := func() error {
		if len(batch) > 0 {
			byShards := map[int][]live.Comment{}
			for _, cm := range batch {
				n := a.shards(ctx, shards, cm.StreamID)
				byShards[n] = append(byShards[n], cm)
			}
			for n, cs := range byShards {
				if err := a.retry(ctx, func() error { return a.d.Store.PutComments(ctx, n, cs) }); err != nil {
					return err
				}
			}
			a.written.Add(float64(len(batch)))
			batch = batch[:0]
		}
		if next >= 0 {
			s.Mark(c.Topic(), c.Partition(), next)
		}
		return nil
	}
	for {
		var rec eventlog.Record
		var ok bool
		if len(batch) == 0 {
			rec, ok = <-c.Records()
		} else {
			select {
			case rec, ok = <-c.Records():
			default:
				if err := flush(); err != nil {
					return err
				}
				continue
			}
		}
		if !ok {
			return flush()
		}
		lr, err := live.DecodeLogRecord(rec.Value)
		if err != nil {
			a.stale.Inc()
			next = rec.Offset + 1
			continue
		}
		switch lr.Kind {
		case live.KindComment:
			batch = append(batch, *lr.Event(rec.Offset).Comment)
			next = rec.Offset + 1
			if len(batch) >= a.cfg.MaxBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		case live.KindRetract:
			if err := flush(); err != nil {
				return err
			}
			rt := lr.Retract
			err := a.retry(ctx, func() error { return a.d.Store.Retract(ctx, lr.StreamID, rt.CommentID, rt.Reason) })
			if errors.Is(err, live.ErrNotFound) {
				a.stale.Inc()
			} else if err != nil {
				return err
			} else {
				a.retracted.Inc()
			}
			next = rec.Offset + 1
		case live.KindState:
			delete(shards, lr.StreamID)
			next = rec.Offset + 1
		}
		if len(batch) == 0 {
			s.Mark(c.Topic(), c.Partition(), next)
		}
	}
}

// shards returns the store shard count of a stream, from its record.
func (a *Archiver) shards(ctx context.Context, cache map[snowflake.ID]int, id snowflake.ID) int {
	if n, ok := cache[id]; ok {
		return n
	}
	n := 1
	if s, err := a.d.Store.GetStream(ctx, id); err == nil && s.Sampled {
		n = live.SampledShards
	}
	cache[id] = n
	return n
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
