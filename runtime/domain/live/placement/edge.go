package placement

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gateway is a live gateway the edge may send viewers to.
type Gateway struct {
	// Name is the gateway's name in its viewer reports (its node name).
	Name string
	// Addr is its HTTP host:port.
	Addr string
}

// EdgeConfig configures an Edge.
type EdgeConfig struct {
	Logger *slog.Logger
	// Registerer receives the edge's metrics (nil: none).
	Registerer prometheus.Registerer
}

// Edge serves GET /v1/streams/{id}/live by proxying it, unbuffered, to
// the gateway its Placer chooses. A connection stays on that gateway for
// its life: neither a change of the stream's width nor of the gateways
// moves it.
type Edge struct {
	p     *Placer
	log   *slog.Logger
	proxy *httputil.ReverseProxy

	mu    sync.Mutex
	addrs map[string]string
	// down holds gateways a connection could not reach, until when they
	// are skipped: between a gateway's death and the registry dropping it
	// (its lease, seconds), its viewers reconnecting go to the stream's
	// next gateway at once.
	down map[string]time.Time

	placed *prometheus.CounterVec
	open   *prometheus.GaugeVec
}

// NewEdge returns an edge placing with p.
func NewEdge(p *Placer, cfg EdgeConfig) *Edge {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Edge{p: p, log: cfg.Logger.With("component", "live-edge"), addrs: map[string]string{}, down: map[string]time.Time{},
		placed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_live_edge_placements_total",
			Help: "Live viewer connections placed by the edge, by how: affinity (among the stream's first k gateways on the ring) or spill (a gateway at 1.25x the fleet average was passed over).",
		}, []string{"how"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "concord_live_edge_connections",
			Help: "Live viewer connections the edge holds open, by gateway (the spread of connections per gateway).",
		}, []string{"gateway"}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(e.placed, e.open)
	}
	e.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			target, _ := r.In.Context().Value(targetKey{}).(*url.URL)
			r.SetURL(target)
			r.SetXForwarded()
		},
		// An event stream is written as it comes.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if a, _ := r.Context().Value(attemptKey{}).(*attempt); a != nil && !a.wrote {
				// Nothing was sent yet: ServeHTTP tries another gateway.
				a.err = err
				return
			}
			if r.Context().Err() == nil {
				e.log.Warn("live gateway unreachable", "err", err)
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if a, _ := resp.Request.Context().Value(attemptKey{}).(*attempt); a != nil {
				a.wrote = true
			}
			return nil
		},
	}
	return e
}

type targetKey struct{}

// attempt is one try at proxying a viewer to a gateway.
type attempt struct {
	wrote bool  // the gateway answered: no retry
	err   error // it could not be reached
}

type attemptKey struct{}

// DownFor is how long a gateway that could not be reached is skipped.
const DownFor = 10 * time.Second

// SetGateways replaces the gateways new connections may go to.
func (e *Edge) SetGateways(gws []Gateway) {
	addrs := make(map[string]string, len(gws))
	names := make([]string, 0, len(gws))
	for _, g := range gws {
		addrs[g.Name] = g.Addr
		names = append(names, g.Name)
	}
	e.mu.Lock()
	e.addrs = addrs
	e.mu.Unlock()
	e.p.SetGateways(names)
}

// Pick is the placement of one new connection to stream, with the
// gateway's address.
func (e *Edge) Pick(stream string) (Choice, string, bool) {
	c, ok := e.p.Pick(stream)
	if !ok {
		return c, "", false
	}
	e.mu.Lock()
	addr, ok := e.addrs[c.Gateway]
	e.mu.Unlock()
	return c, addr, ok
}

// ServeHTTP proxies GET /v1/streams/{id}/live.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" {
		id = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/streams/"), "/live")
	}
	for try := 0; try < 3; try++ {
		c, addr, ok := e.Pick(id)
		if !ok {
			Unavailable(w, "No live gateway is running.")
			return
		}
		how := "affinity"
		if c.Spilled {
			how = "spill"
		}
		e.placed.WithLabelValues(how).Inc()
		a := &attempt{}
		target := &url.URL{Scheme: "http", Host: addr}
		ctx := context.WithValue(context.WithValue(r.Context(), targetKey{}, target), attemptKey{}, a)
		g := e.open.WithLabelValues(c.Gateway)
		g.Inc()
		e.proxy.ServeHTTP(w, r.WithContext(ctx))
		g.Dec()
		if a.err == nil || r.Context().Err() != nil {
			return
		}
		e.log.Warn("live gateway unreachable; trying the stream's next", "gateway", c.Gateway, "err", a.err)
		e.markDown(c.Gateway)
	}
	Unavailable(w, "The live gateways are unreachable.")
}

// markDown skips gateway for DownFor.
func (e *Edge) markDown(gateway string) {
	e.mu.Lock()
	e.down[gateway] = time.Now().Add(DownFor)
	down := make([]string, 0, len(e.down))
	for n, until := range e.down {
		if time.Now().Before(until) {
			down = append(down, n)
		} else {
			delete(e.down, n)
		}
	}
	e.mu.Unlock()
	e.p.SetDown(down)
}

// Unavailable writes the contract's 503 (code 130000) with Retry-After.
func Unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]any{"code": 130000, "message": msg})
}
