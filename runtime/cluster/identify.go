package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/platform"
)

// IdentifyConfig is the identify throttle of gateway nodes
// (runtime/config): a node-wide token bucket in front of every IDENTIFY,
// and, with a shared counters backend (Redis = redis://...), the bots'
// per-bot max_concurrency buckets and daily budget counted across every
// gateway node sharing it.
type IdentifyConfig = config.Identify

// identifyAdmission is the gateway.Backend of a gateway node with the
// identify throttle in front and the identify lookups measured.
type identifyAdmission struct {
	gateway.Backend
	throttle *gateway.NodeThrottle
	// bots is nil without a shared counters backend.
	bots     *gateway.BotAdmission
	counters counters.Counters
	m        *identifyMetrics
}

// identifyMetrics are the concord_cluster_identify_* series of a gateway
// node.
type identifyMetrics struct {
	// lookup is the latency of the backend's Identify: token check and
	// the store reads READY is built from (user, guilds, channels, roles,
	// members; read states with Kafka). This is the load a reconnect storm
	// puts on the shared stores.
	lookup *prometheus.HistogramVec
	// subscribe is the latency of attaching a new session to its guilds
	// on their owners.
	subscribe prometheus.Histogram
	// refused counts identifies answered op 9 by reason.
	refused *prometheus.CounterVec
}

// identifyBuckets resolve latencies from 0.5 ms to about 10 s in steps of
// 1.5×.
var identifyBuckets = prometheus.ExponentialBuckets(0.0005, 1.5, 25)

func newIdentifyMetrics(reg prometheus.Registerer) (*identifyMetrics, error) {
	m := &identifyMetrics{
		lookup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "concord_cluster_identify_lookup_duration_seconds",
			Help:    "Latency of the store lookups of an admitted IDENTIFY (token, user, guilds, READY state), by outcome (ok, error).",
			Buckets: identifyBuckets,
		}, []string{"outcome"}),
		subscribe: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "concord_cluster_identify_subscribe_duration_seconds",
			Help:    "Latency of subscribing an identified session to its guilds on their owners.",
			Buckets: identifyBuckets,
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_cluster_identify_refused_total",
			Help: "IDENTIFYs answered op 9 by the identify throttle, by reason (node_rate, bot_limit).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.lookup, m.subscribe, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cluster: identify metrics: %w", err)
		}
	}
	return m, nil
}

// newIdentifyAdmission wraps a gateway node's backend with the throttle of
// cfg.Identify and, when cfg.Redis names a Redis, the bots'
// shared identify counters.
func newIdentifyAdmission(ctx context.Context, cfg Config, next gateway.Backend, reg prometheus.Registerer, log *slog.Logger) (*identifyAdmission, error) {
	m, err := newIdentifyMetrics(reg)
	if err != nil {
		return nil, err
	}
	a := &identifyAdmission{
		Backend:  next,
		throttle: gateway.NewNodeThrottle(cfg.Identify.Rate, cfg.Identify.Burst, nil),
		m:        m,
	}
	if r := cfg.Redis; r != "" && r != "mem" {
		if a.counters, err = platform.OpenCounters(ctx, cfg); err != nil {
			return nil, fmt.Errorf("cluster: identify counters: %w", err)
		}
		a.bots = &gateway.BotAdmission{Counters: a.counters, Concurrency: cfg.Identify.Concurrency, Logger: log}
	}
	if a.throttle != nil || a.bots != nil {
		log.Info("identify throttle", "rate", cfg.Identify.Rate, "burst", cfg.Identify.Burst, "bot_counters", a.bots != nil)
	}
	return a, nil
}

// Identify implements gateway.Backend: the node throttle first (before
// any store read), then the lookups, then the bot's shared counters.
func (a *identifyAdmission) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	if ok, retry := a.throttle.Allow(); !ok {
		a.m.refused.WithLabelValues("node_rate").Inc()
		return event.Ready{}, fmt.Errorf("cluster: node identify rate reached, next in %s: %w", retry, gateway.ErrIdentifyRateLimited)
	}
	start := time.Now()
	r, err := a.Backend.Identify(ctx, token, s)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	a.m.lookup.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	if err != nil || !r.Bot || a.bots == nil {
		return r, err
	}
	if err := a.bots.Admit(ctx, r.UserID, s.ShardID); err != nil {
		if errors.Is(err, gateway.ErrIdentifyRateLimited) {
			a.m.refused.WithLabelValues("bot_limit").Inc()
		}
		return event.Ready{}, err
	}
	return r, nil
}

// Subscribe implements gateway.Backend, timing the subscription.
func (a *identifyAdmission) Subscribe(ctx context.Context, s event.Session) error {
	start := time.Now()
	err := a.Backend.Subscribe(ctx, s)
	a.m.subscribe.Observe(time.Since(start).Seconds())
	return err
}

// close releases the shared counters; nil-safe.
func (a *identifyAdmission) close() error {
	if a == nil || a.counters == nil {
		return nil
	}
	return a.counters.Close()
}
