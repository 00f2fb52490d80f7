package bots

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the package's Prometheus collectors.
type metrics struct {
	misses     *prometheus.CounterVec
	deliveries *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_bots_interaction_misses_total",
			Help: "Interactions whose application did not respond inside the acknowledgement window.",
		}, []string{"application_id"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_bots_interaction_deliveries_total",
			Help: "Interaction deliveries by path (gateway, http) and result (ok, no_session, failed, retried).",
		}, []string{"path", "result"}),
	}
	if reg == nil {
		return m, nil
	}
	defer func() {
		// Every delivery path and result exists from the start at 0, so
		// the share of misses over deliveries is defined before the first.
		for _, p := range []string{"gateway", "http"} {
			for _, r := range []string{"ok", "no_session", "failed", "retried"} {
				m.deliveries.WithLabelValues(p, r)
			}
		}
	}()
	for _, c := range []**prometheus.CounterVec{&m.misses, &m.deliveries} {
		if err := reg.Register(*c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("%w: register metrics: %w", ErrConfig, err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, fmt.Errorf("%w: register metrics: %w", ErrConfig, err)
			}
			*c = existing
		}
	}
	return m, nil
}
