package cluster

import "net/http"

// drainRoutes adds the gateway role's drain endpoint.
func (n *Node) drainRoutes(mux *http.ServeMux) {
	if n.gateway == nil {
		return
	}
	mux.HandleFunc("POST /admin/drain", func(w http.ResponseWriter, r *http.Request) {
		n.ready.Store(false)
		n.gateway.Drain(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
}
