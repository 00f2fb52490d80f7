package cluster

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/concord-chat/concord/runtime/platform"
)

// operationalRoutes adds /metrics, /healthz and /readyz to mux.
func (n *Node) operationalRoutes(mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{n.metrics, prometheus.DefaultGatherer}, promhttp.HandlerOpts{}))
	platform.HandleHealth(mux, n.ready.Load)
}

// adminRoutes adds the admin endpoints the operator and kubectl-concord
// call (see operator/podadmin): the gateway role's drain, the guild role's
// per-guild statistics.
func (n *Node) adminRoutes(mux *http.ServeMux) {
	n.drainRoutes(mux)
	n.statsRoutes(mux)
}

// adminHandler is the handler of the separate admin listener (Config.Admin).
func (n *Node) adminHandler() http.Handler {
	mux := http.NewServeMux()
	n.operationalRoutes(mux)
	n.adminRoutes(mux)
	return mux
}
