package admission

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the identify series of a gateway.
type metrics struct {
	// lookup is the latency of the backend's Identify: token check and
	// the store reads READY is built from (user, guilds, channels, roles,
	// members, read states). This is the load a reconnect storm puts on
	// the shared stores.
	lookup *prometheus.HistogramVec
	// subscribe is the latency of attaching a new session to its guilds.
	subscribe prometheus.Histogram
	// refused counts identifies answered op 9 by reason.
	refused *prometheus.CounterVec
	// backlog is the identifies between the throttle and their answer:
	// a reconnect storm the stores cannot keep up with shows here first.
	backlog prometheus.Gauge
}

// buckets resolve latencies from 0.5 ms to about 10 s in steps of 1.5×.
var buckets = prometheus.ExponentialBuckets(0.0005, 1.5, 25)

// The series keep the names they had when only `concord serve` exported
// them, so dashboards and recorded benchmarks stay valid.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lookup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "concord_cluster_identify_lookup_duration_seconds",
			Help:    "Latency of the store lookups of an admitted IDENTIFY (token, user, guilds, READY state), by outcome (ok, error).",
			Buckets: buckets,
		}, []string{"outcome"}),
		subscribe: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "concord_cluster_identify_subscribe_duration_seconds",
			Help:    "Latency of subscribing an identified session to its guilds.",
			Buckets: buckets,
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_cluster_identify_refused_total",
			Help: "IDENTIFYs answered op 9, by reason (node_rate, bot_limit, entitlement).",
		}, []string{"reason"}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_cluster_identify_backlog_identifies",
			Help: "IDENTIFYs past the node's throttle still waiting for their lookups and admission checks.",
		}),
	}
	// Every reason exists from the start, so a rate over it is 0, not
	// absent, before the first refusal (alerts and dashboards query it).
	for _, r := range []string{"node_rate", "bot_limit", "entitlement"} {
		m.refused.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.lookup, m.subscribe, m.refused, m.backlog} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("admission: metrics: %w", err)
		}
	}
	return m, nil
}
