// Package moderation is the live path's ML moderation consumer: its own
// consumer group on the comments topic, scoring every comment with the
// classifier port (live.Classifier) in batches of what is waiting, and
// retracting those above a threshold through the path every takedown
// takes — a retraction record appended to the comment's own partition,
// which the router (recent cache, the sampled stream's hold), the
// gateways and the archiver (soft delete with the reason) all follow.
// An author whose comments it took down BanAfter times within BanWindow
// is banned (live/bans/user/<id>, pushed to every API instance's filter
// within seconds). Its progress is published on the board
// (LagKey) so routers can draw sampled streams' samples from trusted
// authors while it lags; and a batch that held a comment of a sampled
// stream (the routers' marks on the board, read every second) is
// followed on its partition by a scored mark (live.KindScored), so the
// router releases what it holds for the classifier as soon as the
// verdicts are in rather than after its whole hold.
package moderation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/filter"
	"github.com/concord-chat/concord/runtime/domain/live/logbatch"
)

// Reason is the reason of the consumer's retractions.
const Reason = "removed by classifier"

// LagKey is the board key where the consumer reports how far behind the
// log it scores (a LagReport), every second.
const LagKey = "live/classifier/lag"

// LagReport is the value of LagKey.
type LagReport struct {
	// LagMs is how long ago the API accepted the newest comment scored
	// (0 when nothing waits).
	LagMs int64 `json:"lag_ms"`
	// At is when it was written (Unix ms); a report older than a few
	// seconds means the consumer is not running.
	At int64 `json:"at"`
}

// Lagging reports whether r (nil: no consumer has ever reported) says the
// classifier is behind by more than max at now: late, or silent for
// more than 5 s. With no report at all nothing is known to lag.
func Lagging(r *LagReport, now time.Time, max time.Duration) bool {
	if r == nil {
		return false
	}
	return r.LagMs > max.Milliseconds() || now.Sub(time.UnixMilli(r.At)) > 5*time.Second
}

// Config configures a Consumer. Zero fields take the defaults.
type Config struct {
	Topics live.Topics
	// Group is the consumer group (default "concord.live.moderation").
	Group string
	// Threshold is the score at or above which a comment is taken down
	// (default 0.9).
	Threshold float64
	// MaxBatch bounds one Score call (default 256).
	MaxBatch int
	// BanAfter takedowns of one author within BanWindow ban the author
	// (defaults 3 and 24 h; BanAfter < 0: never).
	BanAfter  int
	BanWindow time.Duration
	Logger    *slog.Logger
	// Registerer receives the consumer's metrics (nil: none).
	Registerer prometheus.Registerer
	// Now is the clock (tests).
	Now func() time.Time
}

// Deps are the consumer's collaborators.
type Deps struct {
	Log        live.Consumer
	Append     live.Appender
	Classifier live.Classifier
	// Board receives the lag reports and the bans (nil: neither).
	Board live.Board
}

// Consumer is the ML moderation role.
type Consumer struct {
	cfg Config
	d   Deps
	log *slog.Logger

	scored, removed, banned, errs prometheus.Counter
	lag, batch                    prometheus.Histogram

	mu      sync.Mutex
	strikes map[snowflake.ID][]time.Time
	// scoring is the AcceptedAt (Unix ns) of the oldest comment of the
	// batch being scored (0: none); lastLag and lastAt are the lag of the
	// last batch scored and when.
	scoring int64
	lastLag time.Duration
	lastAt  time.Time
	// sampled are the streams the routers hold sampled (the board's
	// live.SampledPrefix, read every second).
	sampled map[snowflake.ID]bool
}

// New returns a Consumer.
func New(cfg Config, d Deps) (*Consumer, error) {
	if d.Log == nil || d.Append == nil || d.Classifier == nil {
		return nil, errors.New("live moderation: Log, Append and Classifier are required")
	}
	if cfg.Topics.Comments == "" {
		cfg.Topics = live.TopicsFor("concord.live.")
	}
	if cfg.Group == "" {
		cfg.Group = "concord.live.moderation"
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = 0.9
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.BanAfter == 0 {
		cfg.BanAfter = 3
	}
	if cfg.BanWindow <= 0 {
		cfg.BanWindow = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_moderation_" + name, Help: help})
	}
	m := &Consumer{cfg: cfg, d: d, log: cfg.Logger.With("component", "live-moderation"), strikes: map[snowflake.ID][]time.Time{},
		scored:  c("comments_scored_total", "Comments the classifier scored."),
		removed: c("comments_removed_total", "Comments taken down for a score at or above the threshold."),
		banned:  c("authors_banned_total", "Authors banned for repeated takedowns."),
		errs:    c("classifier_errors_total", "Failed classifier calls (retried)."),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_moderation_lag_seconds",
			Help: "Time from the API accepting a comment to its score (the classifier's lag).", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_moderation_batch_size",
			Help: "Comments per classifier call.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
	}
	if cfg.Registerer != nil {
		// The lag histogram observes a batch once it is scored, so it
		// stays silent while the classifier is down; the gauge is Lag,
		// the value routers read, which keeps growing then (the
		// classifier-lag alert's signal).
		behind := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "concord_live_moderation_behind_seconds",
			Help: "How far behind the comments the classifier is now: the age of the batch being scored, else of the last batch scored within 2 s, else 0."},
			func() float64 { return m.Lag(m.cfg.Now()).Seconds() })
		cfg.Registerer.MustRegister(m.scored, m.removed, m.banned, m.errs, m.lag, m.batch, behind)
	}
	return m, nil
}

// Run consumes until ctx ends (nil) or the log fails, reporting the lag
// every second.
func (m *Consumer) Run(ctx context.Context) error {
	if m.d.Board != nil {
		go m.report(ctx)
	}
	h := logbatch.Handler[item]{MaxBatch: m.cfg.MaxBatch, Sort: sortRecord, Flush: m.score}
	if err := m.d.Log.Consume(ctx, m.cfg.Group, []string{m.cfg.Topics.Comments}, h); err != nil && ctx.Err() == nil {
		return fmt.Errorf("live moderation: %w", err)
	}
	return nil
}

func (m *Consumer) report(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.readSampled(ctx)
		now := m.cfg.Now()
		r := LagReport{At: now.UnixMilli(), LagMs: m.Lag(now).Milliseconds()}
		v, _ := json.Marshal(r)
		if err := m.d.Board.Put(ctx, LagKey, v, registry.Persistent); err != nil && ctx.Err() == nil {
			m.log.Warn("lag report failed", "err", err)
		}
	}
}

// readSampled refreshes the set of sampled streams from the board; on an
// error it keeps the last one (a stream it misses waits out the router's
// hold, as with no consumer).
func (m *Consumer) readSampled(ctx context.Context) {
	kv, err := m.d.Board.List(ctx, live.SampledPrefix)
	if err != nil {
		return
	}
	set := make(map[snowflake.ID]bool, len(kv))
	for k := range kv {
		if id, err := snowflake.Parse(strings.TrimPrefix(k, live.SampledPrefix)); err == nil {
			set[id] = true
		}
	}
	m.mu.Lock()
	m.sampled = set
	m.mu.Unlock()
}

// holdsSampled reports whether batch has a comment of a sampled stream.
func (m *Consumer) holdsSampled(batch []item) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range batch {
		if m.sampled[it.lr.StreamID] {
			return true
		}
	}
	return false
}

// Lag is how far behind the consumer is at now: the age of the batch it
// is scoring (a classifier that is down keeps it growing), else that of
// the last batch when it was scored in the last 2 s, else 0 (idle).
func (m *Consumer) Lag(now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scoring > 0 {
		return max(0, now.Sub(time.Unix(0, m.scoring)))
	}
	if now.Sub(m.lastAt) < 2*time.Second {
		return m.lastLag
	}
	return 0
}

type item struct {
	lr     live.LogRecord
	offset int64
}

// sortRecord batches the comments to score. Shadow comments are shown
// to their author only: nothing to take down from anyone's screen.
func sortRecord(rec eventlog.Record) (logbatch.Step, item) {
	lr, err := live.DecodeLogRecord(rec.Value)
	if err != nil || lr.Kind != live.KindComment || lr.Comment.Shadow {
		return logbatch.Skip, item{}
	}
	return logbatch.Add, item{lr: lr, offset: rec.Offset}
}

// score classifies one batch (retrying while the classifier fails: the
// comments must still be judged, late) and retracts what is above the
// threshold.
func (m *Consumer) score(ctx context.Context, partition int32, batch []item) error {
	texts := make([]string, len(batch))
	for i, it := range batch {
		texts[i] = it.lr.Comment.Text
	}
	oldest := batch[0].lr.AcceptedAt
	for _, it := range batch {
		if a := it.lr.AcceptedAt; a > 0 && (oldest <= 0 || a < oldest) {
			oldest = a
		}
	}
	m.mu.Lock()
	m.scoring = oldest
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.scoring = 0
		m.mu.Unlock()
	}()
	var scores []float64
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		var err error
		scores, err = m.d.Classifier.Score(ctx, texts)
		if err == nil && len(scores) == len(texts) {
			break
		}
		if err == nil {
			err = fmt.Errorf("%d scores for %d texts", len(scores), len(texts))
		}
		m.errs.Inc()
		m.log.Warn("classifier failed; retrying", "comments", len(texts), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	now := m.cfg.Now()
	m.batch.Observe(float64(len(batch)))
	var recs []eventlog.Record
	var authors []snowflake.ID
	for i, it := range batch {
		if a := it.lr.AcceptedAt; a > 0 {
			m.lag.Observe(now.Sub(time.Unix(0, a)).Seconds())
		}
		if scores[i] < m.cfg.Threshold {
			continue
		}
		cm := it.lr.Comment
		r, err := live.LogRecord{Kind: live.KindRetract, StreamID: it.lr.StreamID, AcceptedAt: now.UnixNano(),
			Retract: &live.Retraction{CommentID: cm.ID, Seq: it.offset, Reason: Reason, AuthorID: cm.Author.ID,
				VideoTSMs: cm.VideoTSMs}}.Record(m.cfg.Topics.Comments)
		if err != nil {
			return err
		}
		recs = append(recs, r)
		authors = append(authors, cm.Author.ID)
	}
	removed := len(recs)
	if m.holdsSampled(batch) {
		// After the retractions, in the same append: a router that reads
		// the mark has read them.
		r, err := live.LogRecord{Kind: live.KindScored, AcceptedAt: now.UnixNano(),
			Scored: &live.ScoredMark{Through: batch[len(batch)-1].offset}}.Record(m.cfg.Topics.Comments)
		if err != nil {
			return err
		}
		recs = append(recs, r)
	}
	if len(recs) > 0 {
		// On the comment's own partition: the retraction can never
		// overtake the comment.
		if _, err := m.d.Append.AppendTo(ctx, m.cfg.Topics.Comments, partition, recs...); err != nil {
			return fmt.Errorf("live moderation: append retractions: %w", err)
		}
		m.removed.Add(float64(removed))
		for _, a := range authors {
			m.strike(ctx, a, now)
		}
	}
	m.scored.Add(float64(len(batch)))
	m.mu.Lock()
	if oldest > 0 {
		m.lastLag, m.lastAt = max(0, now.Sub(time.Unix(0, oldest))), now
	}
	m.mu.Unlock()
	return nil
}

// strike counts a takedown against author and bans at BanAfter.
func (m *Consumer) strike(ctx context.Context, author snowflake.ID, now time.Time) {
	if m.cfg.BanAfter < 0 || m.d.Board == nil || author == 0 {
		return
	}
	m.mu.Lock()
	st := m.strikes[author]
	kept := st[:0]
	for _, t := range st {
		if now.Sub(t) < m.cfg.BanWindow {
			kept = append(kept, t)
		}
	}
	kept = append(kept, now)
	m.strikes[author] = kept
	ban := len(kept) == m.cfg.BanAfter
	m.mu.Unlock()
	if !ban {
		return
	}
	v, _ := json.Marshal(map[string]any{"by": 0, "at": now.UnixMilli(), "reason": Reason})
	if err := m.d.Board.Put(ctx, filter.UserBanKey(author), v, registry.Persistent); err != nil {
		m.log.Warn("repeat offender not banned", "user", author, "err", err)
		return
	}
	m.banned.Inc()
	m.log.Info("repeat offender banned", "user", author, "takedowns", len(kept))
}
