package app

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
	"github.com/concord-chat/concord/web"
)

// Routes is the HTTP surface of a process, the same in both commands:
// the roles' routes (Process.Mux) first; then a WebSocket upgrade
// anywhere else goes to the gateway, GET and HEAD outside the server's
// own paths to the web client, and every other request to the REST
// handler; beside them /metrics, /healthz, /readyz and /admin/.
type Routes struct {
	// Process holds the roles' routes and admin endpoints.
	Process *Process
	// Metrics is what /metrics serves.
	Metrics prometheus.Gatherer
	// Ready reports whether /readyz answers 200.
	Ready func() bool
	// AdminToken guards /admin/; empty, no admin request is served.
	AdminToken string
	// Gateway is the gateway role's node (nil on a process without it).
	Gateway http.Handler
	// REST is the handler on /api/ (nil: a JSON 404).
	REST http.Handler
	// Web configures the web client.
	Web web.Options
}

// Handler serves everything, the admin endpoints included.
func (rt Routes) Handler() http.Handler {
	mux := http.NewServeMux()
	rt.Operational(mux)
	rt.AdminRoutes(mux)
	rt.Public(mux)
	return mux
}

// AdminHandler serves the operational and admin endpoints alone (a
// separate admin listener).
func (rt Routes) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	rt.Operational(mux)
	rt.AdminRoutes(mux)
	return mux
}

// Operational adds /metrics, /healthz and /readyz to mux.
func (rt Routes) Operational(mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(rt.Metrics, promhttp.HandlerOpts{}))
	HandleHealth(mux, rt.Ready)
}

// AdminRoutes adds /admin/ to mux: the roles' admin endpoints
// (Process.Admin), behind the admin token.
func (rt Routes) AdminRoutes(mux *http.ServeMux) {
	mux.Handle("/admin/", adminauth.Guard(rt.AdminToken, rt.Process.Admin))
}

// Public adds the roles' routes and the fallback (the gateway's root-path
// upgrade, the web client, the REST handler) on "/".
func (rt Routes) Public(mux *http.ServeMux) {
	restAPI := rt.REST
	if restAPI == nil {
		restAPI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rest.WriteError(w, &rest.Error{Status: http.StatusNotFound, Message: "404: Not Found"})
		})
	}
	fallback := WebOr(web.Handler(rt.Web), restAPI)
	if rt.Gateway != nil {
		fallback = UpgradeOr(rt.Gateway, fallback)
	}
	roles := rt.Process.Mux
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := roles.Handler(r); pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		fallback.ServeHTTP(w, r)
	}))
}

// HandleHealth registers GET /healthz (always 200 while the process
// serves) and GET /readyz (200 when ready reports true, else 503) on mux.
// `concord dev` and every `concord serve` node use the same probes.
func HandleHealth(mux *http.ServeMux, ready func() bool) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready")
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// UpgradeOr sends every WebSocket upgrade to gw and everything else to
// next: discord.py connects to its default gateway URL, the root path, so
// an upgrade anywhere outside the roles' routes reaches the gateway.
func UpgradeOr(gw, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			gw.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WebOr sends GET and HEAD to the web client and every other request to
// next. Paths the server itself owns (the API, the gateway, admin, health,
// metrics, live comments) never reach the app, so a listener that does not
// serve one of them answers next's JSON 404 instead of the app's page.
func WebOr(app, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && !serverPath(r.URL.Path) {
			app.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serverPath reports whether path belongs to the server rather than to the
// web client's routes.
func serverPath(path string) bool {
	for _, p := range []string{"/api", "/admin", "/gateway", "/v1", "/metrics", "/healthz", "/readyz", "/livez"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// Gate is the HTTP handler of a process whose backends are still
// connecting (opening blocks while Cassandra is down, retrying with
// backoff): /healthz answers 200, /readyz answers 503, and every other
// request 503 with Retry-After, at once instead of hanging. Open switches
// it to the process's handler.
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
