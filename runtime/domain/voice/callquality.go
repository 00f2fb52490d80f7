package voice

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-call quality. Every load period the server sums, per call, the
// speakers' expected and lost packets, their jitter and the round trips
// its WebRTC listeners report, and keeps the result until the next
// period. The server's own figures (Load.LossRatio, Jitter, RTT) are the
// same sums over all calls; the fleet's allocator reads them. Per-call
// series would grow with the calls, so the collector exports at most
// MaxCallSeries calls per scrape: the worst ones (most loss, then most
// jitter), the ones an operator looks for.

// MaxCallSeries bounds the calls exported per scrape.
const MaxCallSeries = 50

// rttSample accumulates round trips between two reports.
type rttSample struct {
	sum atomic.Int64 // nanoseconds
	n   atomic.Int64
}

func (r *rttSample) add(d time.Duration) {
	r.sum.Add(int64(d))
	r.n.Add(1)
}

// take returns the samples' sum and count and starts over.
func (r *rttSample) take() (time.Duration, int64) {
	return time.Duration(r.sum.Swap(0)), r.n.Swap(0)
}

// CallQuality is one call's quality over the last load period.
type CallQuality struct {
	Guild, Channel string
	Participants   int
	LossRatio      float64
	Jitter, RTT    time.Duration
}

// callQualities holds the last period's figures for the collector.
type callQualities struct {
	mu    sync.Mutex
	calls []CallQuality
}

func (c *callQualities) set(cs []CallQuality) {
	slices.SortFunc(cs, func(a, b CallQuality) int {
		switch {
		case a.LossRatio != b.LossRatio:
			if a.LossRatio > b.LossRatio {
				return -1
			}
			return 1
		case a.Jitter != b.Jitter:
			if a.Jitter > b.Jitter {
				return -1
			}
			return 1
		case a.Guild != b.Guild:
			if a.Guild < b.Guild {
				return -1
			}
			return 1
		}
		if a.Channel < b.Channel {
			return -1
		}
		if a.Channel > b.Channel {
			return 1
		}
		return 0
	})
	if len(cs) > MaxCallSeries {
		cs = cs[:MaxCallSeries]
	}
	c.mu.Lock()
	c.calls = cs
	c.mu.Unlock()
}

// CallQuality returns the worst calls of the last load period (at most
// MaxCallSeries), worst first.
func (s *Server) CallQuality() []CallQuality {
	s.cq.mu.Lock()
	defer s.cq.mu.Unlock()
	return slices.Clone(s.cq.calls)
}

// callCollector exports callQualities.
type callCollector struct {
	cq                            *callQualities
	loss, jitter, rtt, partsGauge *prometheus.Desc
}

func newCallCollector(cq *callQualities, server string) *callCollector {
	l := prometheus.Labels{"server": server}
	labels := []string{"guild", "channel"}
	return &callCollector{cq: cq,
		loss: prometheus.NewDesc("concord_voice_call_loss_ratio",
			"Share of a call's speakers' packets lost over the last load period (the worst calls only, at most 50).", labels, l),
		jitter: prometheus.NewDesc("concord_voice_call_jitter_seconds",
			"Mean interarrival jitter of a call's speakers over the last load period (the worst calls only).", labels, l),
		rtt: prometheus.NewDesc("concord_voice_call_rtt_seconds",
			"Mean round trip reported by a call's WebRTC listeners over the last load period (the worst calls only; 0 without reports).", labels, l),
		partsGauge: prometheus.NewDesc("concord_voice_call_participants",
			"Participants of a call (the worst calls only).", labels, l),
	}
}

func (c *callCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.loss
	ch <- c.jitter
	ch <- c.rtt
	ch <- c.partsGauge
}

func (c *callCollector) Collect(ch chan<- prometheus.Metric) {
	c.cq.mu.Lock()
	calls := c.cq.calls
	c.cq.mu.Unlock()
	for _, q := range calls {
		ch <- prometheus.MustNewConstMetric(c.loss, prometheus.GaugeValue, q.LossRatio, q.Guild, q.Channel)
		ch <- prometheus.MustNewConstMetric(c.jitter, prometheus.GaugeValue, q.Jitter.Seconds(), q.Guild, q.Channel)
		ch <- prometheus.MustNewConstMetric(c.rtt, prometheus.GaugeValue, q.RTT.Seconds(), q.Guild, q.Channel)
		ch <- prometheus.MustNewConstMetric(c.partsGauge, prometheus.GaugeValue, float64(q.Participants), q.Guild, q.Channel)
	}
}

// callPeriod sums one call's period: it commits the speakers' quality
// periods and takes the listeners' RTT samples.
func callPeriod(c *call, commit bool) (q CallQuality, expected, lost uint64, jitterSum time.Duration, streams int, rttSum time.Duration, rttN int64) {
	ms := c.snapshot()
	q = CallQuality{Guild: strconv.FormatUint(uint64(c.key.guild), 10), Channel: strconv.FormatUint(uint64(c.key.channel), 10),
		Participants: len(ms)}
	for _, p := range ms {
		p.mu.Lock()
		e, lo, j := p.quality.period(commit)
		p.mu.Unlock()
		if commit {
			if d, n := p.rtt.take(); n > 0 {
				rttSum += d
				rttN += n
			}
		}
		if e == 0 {
			continue
		}
		expected += e
		lost += lo
		jitterSum += j
		streams++
	}
	if expected > 0 {
		q.LossRatio = float64(lost) / float64(expected)
	}
	if streams > 0 {
		q.Jitter = jitterSum / time.Duration(streams)
	}
	if rttN > 0 {
		q.RTT = rttSum / time.Duration(rttN)
	}
	return q, expected, lost, jitterSum, streams, rttSum, rttN
}
