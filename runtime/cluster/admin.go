package cluster

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/concord-chat/concord/runtime/adminauth"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/role"
)

// operationalRoutes adds /metrics, /healthz and /readyz to mux.
func (n *Node) operationalRoutes(mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{n.metrics, prometheus.DefaultGatherer}, promhttp.HandlerOpts{}))
	platform.HandleHealth(mux, func() bool { return n.ready.Load() && n.group.Ready() == nil })
}

// adminRoutes adds the admin endpoints the operator and kubectl-concord
// call (see operator/podadmin): the guild role's per-guild statistics;
// all of /admin/ behind the node's admin token.
func (n *Node) adminRoutes(mux *http.ServeMux) {
	admin := http.NewServeMux()
	n.statsRoutes(admin)
	// The roles' admin endpoints (the gateway role's drain and hand-off,
	// the voice role's drain) follow, behind the same token.
	mux.Handle("/admin/", adminauth.Guard(n.adminToken, role.AdminHandler(admin, n.roleAdmin)))
}

// nodeAdminToken is the admin token of a node: the configured one, else
// the one derived from the cluster's token-signing key, which every node
// and the operator share.
func nodeAdminToken(cfg platform.Config, serverKey []byte) string {
	if cfg.AdminToken != "" {
		return cfg.AdminToken
	}
	return adminauth.Derive(serverKey)
}

// adminHandler is the handler of the separate admin listener (Config.Admin).
func (n *Node) adminHandler() http.Handler {
	mux := http.NewServeMux()
	n.operationalRoutes(mux)
	n.adminRoutes(mux)
	return mux
}
