package presence

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors.
type metrics struct {
	updates    prometheus.Counter
	rejected   *prometheus.CounterVec
	broadcasts prometheus.Counter
	coalesced  prometheus.Counter
	absorbed   prometheus.Counter
	expired    prometheus.Counter
	sessions   prometheus.Gauge
}

func (m *metrics) init(reg prometheus.Registerer) error {
	m.updates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_presence_updates_total", Help: "Client presence updates (op 3) applied."})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_presence_rejected_updates_total", Help: "Presence updates rejected, by reason (invalid, rate_limited)."},
		[]string{"reason"})
	m.broadcasts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_presence_broadcasts_total", Help: "Coalesced presence changes handed to the router."})
	m.coalesced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_presence_coalesced_total", Help: "Windows that closed with the presence unchanged, so nothing was broadcast."})
	m.absorbed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_presence_absorbed_total", Help: "Changes taken in silently during warmup after a restart."})
	m.expired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_presence_expired_sessions_total", Help: "Sessions dropped because their gateway node stopped reporting."})
	m.sessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "concord_presence_sessions", Help: "Live sessions known to the presence service."})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.updates, m.rejected, m.broadcasts, m.coalesced, m.absorbed, m.expired, m.sessions} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("presence: register metrics: %w", err)
		}
	}
	return nil
}
