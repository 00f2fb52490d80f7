package cluster

import "net/http"

// statsRoutes adds the guild role's statistics endpoints.
func (n *Node) statsRoutes(mux *http.ServeMux) {}
