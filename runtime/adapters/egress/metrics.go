package egress

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Client's Prometheus collectors.
type metrics struct {
	requests   *prometheus.CounterVec
	denials    *prometheus.CounterVec
	bodyErrors *prometheus.CounterVec
	duration   prometheus.Histogram
}

func (m *metrics) init(reg prometheus.Registerer) error {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_egress_requests_total",
		Help: "Outbound requests to bot-chosen URLs, by the result of getting response headers (ok, forbidden, invalid_url, too_many_redirects, too_large, timeout, error)."},
		[]string{"result"})
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_egress_denials_total",
		Help: "Addresses refused before connecting, by reason (loopback, private, metadata, ...)."},
		[]string{"reason"})
	m.bodyErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_egress_body_errors_total",
		Help: "Response bodies that failed while being read, by result (too_large, timeout, error)."},
		[]string{"result"})
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "concord_egress_response_seconds", Help: "Time until response headers of successful requests.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.denials, m.bodyErrors, m.duration} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("egress: register metrics: %w", err)
		}
	}
	return nil
}
