package entitlement

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Manager's Prometheus series.
type metrics struct {
	renewals        *prometheus.CounterVec
	renewalSeconds  prometheus.Histogram
	revocations     *prometheus.CounterVec
	pushes          *prometheus.CounterVec
	identifyRefused prometheus.Counter
	leases          prometheus.Gauge
	staleLeases     prometheus.Gauge
	leaseAgeMax     prometheus.Gauge
	pushConnected   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_entitlement_renewals_total",
			Help: "Lease renewals (Source reads) by result: ok, error.",
		}, []string{"result"}),
		renewalSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "concord_entitlement_renewal_duration_seconds",
			Help:    "Time of one lease renewal's Source read.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_entitlement_revocations_applied_total",
			Help: "Revocations applied to sessions of this node, by what (guild, token_reset, application_gone, unavailable) and how they were learnt (push, renewal, grace).",
		}, []string{"what", "via"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_entitlement_pushes_total",
			Help: "Revocation pushes received (received), missed and found in a later snapshot (missed), and published (published, publish_error).",
		}, []string{"result"}),
		identifyRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_entitlement_identify_refused_total",
			Help: "Bot IDENTIFYs refused because entitlements were unavailable.",
		}),
		leases: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_entitlement_leases",
			Help: "Bot leases held by this node.",
		}),
		staleLeases: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_entitlement_leases_stale",
			Help: "Leases past their TTL without a renewal (running on the outage grace).",
		}),
		leaseAgeMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_entitlement_lease_age_max_seconds",
			Help: "Age of the oldest lease's last successful read.",
		}),
		pushConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_entitlement_push_connected",
			Help: "1 while the revocation push watch follows the registry.",
		}),
	}
	// Every push result exists from the start at 0, so the revocation
	// push alert's increase() sees the first failure.
	for _, r := range []string{"received", "missed", "published", "publish_error"} {
		m.pushes.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.renewals, m.renewalSeconds, m.revocations, m.pushes,
		m.identifyRefused, m.leases, m.staleLeases, m.leaseAgeMax, m.pushConnected} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("entitlement: register metrics: %w", err)
		}
	}
	return m, nil
}
