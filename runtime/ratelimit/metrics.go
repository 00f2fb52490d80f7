package ratelimit

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the limiter's Prometheus collectors.
type metrics struct {
	requests      *prometheus.CounterVec
	invalid       prometheus.Counter
	bans          *prometheus.CounterVec
	counterErrors *prometheus.CounterVec
}

func (m *metrics) init(reg prometheus.Registerer) error {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_ratelimit_requests_total", Help: "REST requests checked, by result (allowed, route_limited, global_limited, banned)."},
		[]string{"result"})
	m.invalid = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_ratelimit_invalid_requests_total", Help: "Responses counted as invalid requests (401, 403, non-shared 429)."})
	m.bans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_ratelimit_bans_total", Help: "Timed bans issued for invalid requests, by kind (token, address)."},
		[]string{"kind"})
	m.counterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_ratelimit_counter_errors_total", Help: "Counters calls that failed, so the request was allowed unchecked, by operation."},
		[]string{"op"})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.invalid, m.bans, m.counterErrors} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("ratelimit: register metrics: %w", err)
		}
	}
	return nil
}
