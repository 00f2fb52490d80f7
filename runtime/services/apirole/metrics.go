package apirole

import "github.com/prometheus/client_golang/prometheus"

// proxyMetrics are the api node's concord_api_proxy_* series.
type proxyMetrics struct {
	// proxyRetries counts forwarded requests sent again, by reason:
	// unreachable (connection refused), not_owner (the node's ring
	// disagreed) or lost (the owner died mid-request).
	proxyRetries *prometheus.CounterVec
	// proxyFailures counts requests answered 503 because no guild node
	// could serve them in time.
	proxyFailures prometheus.Counter
}

// newProxyMetrics registers the proxy's series on reg (nil: none).
func newProxyMetrics(reg prometheus.Registerer) (*proxyMetrics, error) {
	m := &proxyMetrics{
		proxyRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_api_proxy_retries_total",
			Help: "REST requests the api node sent again, by reason (unreachable, not_owner, lost).",
		}, []string{"reason"}),
		proxyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_api_proxy_failures_total",
			Help: "REST requests the api node answered 503 because no guild node served them in time.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.proxyRetries, m.proxyFailures} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
