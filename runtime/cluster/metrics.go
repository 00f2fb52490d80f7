package cluster

import "github.com/prometheus/client_golang/prometheus"

// metrics are a node's concord_cluster_* series.
type metrics struct {
	// proxyRetries counts forwarded requests sent again, by reason:
	// unreachable (connection refused), not_owner (the node's ring
	// disagreed) or lost (the owner died mid-request).
	proxyRetries *prometheus.CounterVec
	// proxyFailures counts requests answered 503 because no guild node
	// could serve them in time.
	proxyFailures prometheus.Counter
	// resubscribed counts session subscriptions a gateway sent again
	// because their guild moved or the last attempt failed.
	resubscribed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		proxyRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_cluster_proxy_retries_total",
			Help: "REST requests the API node sent again, by reason (unreachable, not_owner, lost).",
		}, []string{"reason"}),
		proxyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_cluster_proxy_failures_total",
			Help: "REST requests the API node answered 503 because no guild node served them in time.",
		}),
		resubscribed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_cluster_resubscriptions_total",
			Help: "Session subscriptions a gateway node sent again after a guild moved or a failed attempt.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.proxyRetries, m.proxyFailures, m.resubscribed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
