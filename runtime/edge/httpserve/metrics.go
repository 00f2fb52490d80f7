package httpserve

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are process-wide: every listener of the process adds to them.
var metrics = struct {
	open     prometheus.Gauge
	rejected *prometheus.CounterVec
}{
	open: promauto.NewGauge(prometheus.GaugeOpts{
		Name: "concord_http_connections_open",
		Help: "HTTP connections accepted and not yet closed, over every listener.",
	}),
	rejected: promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_http_connections_rejected_total",
		Help: "HTTP connections refused at accept, by the cap they exceeded (per_address, total).",
	}, []string{"reason"}),
}

// Collectors are the package's metrics, for a process that serves its own
// registry rather than Prometheus's default one.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metrics.open, metrics.rejected}
}
