package cassandra

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Automatic bucket narrowing.
//
// The store measures each channel's write rate in bytes over a window
// (NarrowingConfig.Window). When the rate would put more than
// MaxBucketBytes into one bucket of the channel's width, the channel gets
// the widest width of NarrowingConfig.Widths that keeps a bucket under
// TargetBucketBytes, from a message id a few seconds in the future (see
// SetBucketWidth). The seed's busiest channel — 20 messages a second of
// ~300 bytes, 6 KB/s — fills a 10-day bucket with ~5 GB; it gets 1 hour
// (~22 MB).
//
// The rate is measured where the writes happen. With the data service in
// front, every write of a channel goes through one instance, so one
// process sees a channel's whole rate; without it each process sees its
// share, and narrowing happens later than it should.

// NarrowingConfig configures automatic bucket narrowing.
type NarrowingConfig struct {
	// Disabled turns automatic narrowing off.
	Disabled bool
	// MaxBucketBytes is the projected bucket size that triggers narrowing.
	// Default: 100 MB.
	MaxBucketBytes int64
	// TargetBucketBytes is the projected size the new width aims under.
	// Default: 25 MB.
	TargetBucketBytes int64
	// Window is the rate measurement window. Default: 1 minute.
	Window time.Duration
	// Widths are the widths narrowing picks from, widest first. Default:
	// 5d, 2d, 1d, 12h, 6h, 3h, 1h, 30m, 15m, 5m, 1m.
	Widths []time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// DefaultNarrowingConfig returns the defaults of NarrowingConfig.
func DefaultNarrowingConfig() NarrowingConfig {
	return NarrowingConfig{
		MaxBucketBytes:    100 << 20,
		TargetBucketBytes: 25 << 20,
		Window:            time.Minute,
		Widths: []time.Duration{5 * 24 * time.Hour, 2 * 24 * time.Hour, 24 * time.Hour, 12 * time.Hour,
			6 * time.Hour, 3 * time.Hour, time.Hour, 30 * time.Minute, 15 * time.Minute, 5 * time.Minute, time.Minute},
		Now: time.Now,
	}
}

func (c NarrowingConfig) withDefaults() NarrowingConfig {
	d := DefaultNarrowingConfig()
	if c.MaxBucketBytes <= 0 {
		c.MaxBucketBytes = d.MaxBucketBytes
	}
	if c.TargetBucketBytes <= 0 {
		c.TargetBucketBytes = d.TargetBucketBytes
	}
	if c.Window <= 0 {
		c.Window = d.Window
	}
	if len(c.Widths) == 0 {
		c.Widths = d.Widths
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}

var narrowings = promauto.NewCounter(prometheus.CounterOpts{
	Name: "concord_store_bucket_narrowings_total",
	Help: "Channels whose message bucket width was narrowed automatically.",
})

// bucketBytes is the storage dashboard's bucket sizes: the size a
// channel's current bucket is on course for, measured where narrowing
// measures it (each closed rate window, per channel), so the panel shows
// what narrowing decides on. Buckets from 64 KiB to 4 GiB.
var bucketBytes = promauto.NewHistogram(prometheus.HistogramOpts{
	Name:    "concord_store_bucket_projected_bytes",
	Help:    "Projected size of a channel's message bucket at its measured write rate and current width, once per channel and rate window.",
	Buckets: prometheus.ExponentialBuckets(64<<10, 4, 9),
})

type narrower struct {
	cfg NarrowingConfig

	mu    sync.Mutex
	rates map[snowflake.ID]*channelRate
}

type channelRate struct {
	start    time.Time
	bytes    int64
	inFlight bool
}

func newNarrower(cfg NarrowingConfig) *narrower {
	return &narrower{cfg: cfg, rates: map[snowflake.ID]*channelRate{}}
}

// observe adds a write of size bytes to ch and returns the rate in bytes
// per second when a window just closed, else 0.
func (n *narrower) observe(ch snowflake.ID, size int) (rate float64, now time.Time) {
	now = n.cfg.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.rates[ch]
	if r == nil {
		if len(n.rates) >= maxCachedChannels {
			for k, v := range n.rates {
				if now.Sub(v.start) > 2*n.cfg.Window {
					delete(n.rates, k)
				}
			}
		}
		r = &channelRate{start: now}
		n.rates[ch] = r
	}
	r.bytes += int64(size)
	elapsed := now.Sub(r.start)
	if elapsed < n.cfg.Window || r.inFlight {
		return 0, now
	}
	rate = float64(r.bytes) / elapsed.Seconds()
	r.start, r.bytes = now, 0
	return rate, now
}

// pick returns the width for rate (bytes/s) when cur is too wide, or 0.
func (n *narrower) pick(rate float64, cur time.Duration) time.Duration {
	if rate*cur.Seconds() <= float64(n.cfg.MaxBucketBytes) {
		return 0
	}
	for _, w := range n.cfg.Widths {
		if w < cur && rate*w.Seconds() <= float64(n.cfg.TargetBucketBytes) {
			return w
		}
	}
	if last := n.cfg.Widths[len(n.cfg.Widths)-1]; last < cur {
		return last
	}
	return 0
}

func (n *narrower) setInFlight(ch snowflake.ID, v bool) {
	n.mu.Lock()
	if r := n.rates[ch]; r != nil {
		r.inFlight = v
	}
	n.mu.Unlock()
}

// observeWrite feeds the narrower and narrows ch when its rate calls for
// it. The width change (one read and one write, once per channel and
// window at most) runs inside the PutMessage that closed the window; a
// failure is logged, never returned — the message is already written —
// and retried at the end of the next window.
func (s *Store) observeWrite(ctx context.Context, ch, id snowflake.ID, size int) {
	if s.cfg.Narrowing.Disabled {
		return
	}
	rate, now := s.narrow.observe(ch, size)
	if rate == 0 {
		return
	}
	from := s.NarrowFrom(now)
	ws, err := s.channelWidths(ctx, ch)
	if err != nil {
		return
	}
	cur := ws.widthAt(from, s.cfg.DefaultBucketWidth)
	bucketBytes.Observe(rate * cur.Seconds())
	w := s.narrow.pick(rate, cur)
	if w == 0 {
		return
	}
	s.narrow.setInFlight(ch, true)
	defer s.narrow.setInFlight(ch, false)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	defer cancel()
	if err := s.SetBucketWidth(ctx, ch, from, w, "auto: "+formatRate(rate)); err != nil {
		s.log.Warn("bucket narrowing failed", "channel_id", ch, "width", w, "err", err)
		return
	}
	narrowings.Inc()
}

func formatRate(bps float64) string {
	return strconv.FormatFloat(bps/1000, 'f', 1, 64) + " KB/s"
}
