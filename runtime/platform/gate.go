package platform

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// Gate is the HTTP handler of a process whose backends are still
// connecting (New blocks while Cassandra is down, retrying with backoff):
// /healthz answers 200, /readyz answers 503, and every other request 503
// with Retry-After, at once instead of hanging. Open switches it to the
// platform's handler.
type Gate struct {
	h atomic.Pointer[http.Handler]
}

// Open makes the gate forward every request to h from now on.
func (g *Gate) Open(h http.Handler) { g.h.Store(&h) }

// ServeHTTP implements http.Handler.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	case "/readyz":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: connecting to the backends")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"message": "503: Service Unavailable (starting: connecting to the backends)", "code": 0}`)
	}
}
