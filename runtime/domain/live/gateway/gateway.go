// Package gateway is the live-comments SSE gateway: it serves
// GET /v1/streams/{id}/live, subscribes to a stream's relay topic at its
// first local viewer (then reads the snapshot, so nothing falls between)
// and unsubscribes 30 s after the last, keeps a ring of the stream's last
// 500 events for joins and Last-Event-ID resumes, refills sequence gaps
// from the recent cache, flushes each viewer at most every 250 ms, cuts
// viewers that fall too far behind, merges reaction partials into one
// event per stream per second, and reports its viewer counts to the board.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Config configures a Gateway. Zero fields take the stated defaults.
type Config struct {
	// Name identifies this gateway's viewer reports (default: host name
	// and pid).
	Name string
	// FlushInterval spaces the writes of a busy stream's events: while
	// they arrive less than QuietGap apart, a stream's viewers are
	// flushed once per FlushInterval (default 250 ms).
	FlushInterval time.Duration
	// QuietGap is when batching stops paying: an event that arrives when
	// the stream's last event flush is at least QuietGap old is written
	// at once (default 150 ms, at most FlushInterval). It sits above the
	// router's 100 ms batch window, so a stream whose router batches
	// back to back stays batched, and below FlushInterval, so a stream
	// posting every 200 ms no longer waits for a 250 ms slot.
	QuietGap time.Duration
	// PingInterval is the time between ": ping" comment lines (default 15 s).
	PingInterval time.Duration
	// Linger is how long a stream stays subscribed after its last local
	// viewer leaves (default 30 s).
	Linger time.Duration
	// ReportInterval is how often viewer counts are reported and viewers
	// events sent (default 5 s).
	ReportInterval time.Duration
	// MaxPending bounds the bytes queued for one viewer; a viewer past it
	// is cut (default 256 KiB).
	MaxPending int
	// WriteTimeout bounds one write to a viewer; a viewer whose connection
	// takes longer is cut (default 10 s).
	WriteTimeout time.Duration
	// MaxViewers bounds this gateway's connections; past it new viewers
	// get 503 (default 100,000).
	MaxViewers int
	// DrainSpread is the longest reconnection time Drain gives a viewer
	// it sends away (default 5 s): the audience of a stopping gateway
	// comes back to the others spread over it.
	DrainSpread time.Duration
	Logger      *slog.Logger
	// Registerer receives the gateway's metrics (nil: none).
	Registerer prometheus.Registerer
}

// Deps are the gateway's collaborators.
type Deps struct {
	Relay  live.Relay
	Recent live.Recent
	// Store is read once per stream subscription, for the stream's state.
	Store live.Store
	// Board receives viewer reports; nil keeps counts local.
	Board    live.Board
	Verifier live.Verifier
	// Friends, when set, is asked once per authenticated viewer's join for
	// the viewer's friends: their rest-tier comments on a sampled stream
	// are shown to the viewer too. An error (or nil) loses only that
	// boost.
	Friends live.Friends
}

// Gateway is the SSE gateway role.
type Gateway struct {
	cfg Config
	d   Deps
	log *slog.Logger
	m   metrics

	// now, when set, replaces time.Now in the flush rule (tests).
	now func() time.Time

	mu      sync.Mutex
	hubs    map[snowflake.ID]*hub
	viewers int
	// draining is set by Drain (under mu, with gone); gone is closed when
	// the last viewer left after it.
	draining atomic.Bool
	gone     chan struct{}
}

// New returns a Gateway; Run must run for reports, reaction events and
// unsubscribing.
func New(cfg Config, d Deps) (*Gateway, error) {
	if d.Relay == nil || d.Recent == nil || d.Store == nil || d.Verifier == nil {
		return nil, errors.New("live gateway: Relay, Recent, Store and Verifier are required")
	}
	if cfg.Name == "" {
		h, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 250 * time.Millisecond
	}
	if cfg.QuietGap <= 0 {
		cfg.QuietGap = 150 * time.Millisecond
	}
	cfg.QuietGap = min(cfg.QuietGap, cfg.FlushInterval)
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 15 * time.Second
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 30 * time.Second
	}
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = 5 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 256 << 10
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.MaxViewers <= 0 {
		cfg.MaxViewers = 100_000
	}
	if cfg.DrainSpread <= 0 {
		cfg.DrainSpread = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Gateway{cfg: cfg, d: d, log: cfg.Logger.With("component", "live-gateway", "gateway", cfg.Name),
		m: newMetrics(cfg.Registerer), hubs: map[snowflake.ID]*hub{}}, nil
}

// streamID reads the stream id of /v1/streams/{id}/live.
func streamID(r *http.Request) (snowflake.ID, bool) {
	raw := r.PathValue("id")
	if raw == "" {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/streams/")
		if !ok {
			return 0, false
		}
		raw, ok = strings.CutSuffix(rest, "/live")
		if !ok {
			return 0, false
		}
	}
	id, err := snowflake.Parse(raw)
	return id, err == nil
}

// lastEventID reads Last-Event-ID (header, else ?last_event_id=): -1 when
// absent or not a seq.
func lastEventID(r *http.Request) int64 {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// ServeHTTP serves GET /v1/streams/{id}/live.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, 0, "405: Method Not Allowed")
		return
	}
	id, ok := streamID(r)
	if !ok {
		writeError(w, http.StatusNotFound, codeUnknownStream, "Unknown Stream")
		return
	}
	user, err := g.authenticate(r)
	if err != nil {
		if errors.Is(err, auth.ErrInvalidToken) {
			writeError(w, http.StatusUnauthorized, codeUnauthorized, "401: Unauthorized")
		} else {
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "The live comments service is temporarily unavailable.")
		}
		return
	}
	g.mu.Lock()
	if g.draining.Load() {
		g.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "This gateway is draining; retry.")
		return
	}
	if g.viewers >= g.cfg.MaxViewers {
		g.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "This gateway is full; retry.")
		return
	}
	g.viewers++
	h := g.acquireLocked(id)
	g.mu.Unlock()
	detached := false
	defer func() {
		if !detached {
			g.release(h)
		}
	}()

	select {
	case <-h.ready:
	case <-r.Context().Done():
		return
	}
	if h.err != nil {
		if errors.Is(h.err, live.ErrNotFound) {
			writeError(w, http.StatusNotFound, codeUnknownStream, "Unknown Stream")
		} else {
			g.log.Warn("stream subscription failed", "stream", id, "err", h.err)
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "The live comments service is temporarily unavailable.")
		}
		return
	}
	v := newViewer(user)
	if c, ok := g.detach(w, r); ok {
		// HTTP/1.1: the connection left net/http; its watcher releases
		// the hub when it closes.
		detached = true
		if c != nil {
			g.serveDetached(c, h, v, lastEventID(r))
		} else {
			g.release(h)
		}
		return
	}
	h.join(v, lastEventID(r))
	g.joinedWhileDraining(v)
	g.fetchFriends(h, v)
	defer h.leave(v)
	g.serve(w, r, v)
}

// MaxFriends bounds the friends indexed per viewer (the seed's "top ~200").
const MaxFriends = 200

// fetchFriends asks Friends, in the background, for the friends of v's
// user and indexes them on h, so rest-tier comments of a sampled stream by
// those friends reach v. It is asked once per join; a failure (or no
// Friends) loses only the boost.
func (g *Gateway) fetchFriends(h *hub, v *viewer) {
	if g.d.Friends == nil || v.user == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		fs, err := g.d.Friends.Friends(ctx, v.user)
		if err != nil {
			g.m.friendFetches.WithLabelValues("error").Inc()
			g.log.Debug("friends not fetched; no boost for this viewer", "user", v.user, "err", err)
			return
		}
		if len(fs) > MaxFriends {
			fs = fs[:MaxFriends]
		}
		h.fan(v, append(make([]snowflake.ID, 0, len(fs)), fs...))
		// Counted once indexed: a viewer counted here gets the boost.
		g.m.friendFetches.WithLabelValues("ok").Inc()
	}()
}

// authenticate reads Authorization, else ?token= (EventSource cannot set
// headers); no token is an anonymous viewer (0).
func (g *Gateway) authenticate(r *http.Request) (snowflake.ID, error) {
	token := auth.StripPrefix(r.Header.Get("Authorization"))
	if token == "" {
		token = r.URL.Query().Get("token")
	}
	if token == "" {
		return 0, nil
	}
	return g.d.Verifier.Verify(r.Context(), token)
}

const (
	codeUnknownStream = 10090
	codeUnauthorized  = 40001
	codeUnavailable   = 130000
)

func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"code":%d,"message":%q}`, code, msg)
}

// acquireLocked returns the stream's hub, creating and subscribing it if
// this is the first local viewer. g.mu is held.
func (g *Gateway) acquireLocked(id snowflake.ID) *hub {
	h := g.hubs[id]
	if h == nil || h.dead {
		h = newHub(g, id)
		g.hubs[id] = h
		go h.start()
	}
	h.refs++
	return h
}

// release drops a reference taken by acquireLocked; a failed hub with no
// references is forgotten at once, a healthy one lingers (Run).
func (g *Gateway) release(h *hub) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.viewers--
	if g.draining.Load() && g.viewers == 0 {
		close(g.gone)
	}
	h.refs--
	if h.refs == 0 {
		h.idleSince = time.Now()
		if h.dead && g.hubs[h.id] == h {
			delete(g.hubs, h.id)
		}
	}
}

// Viewers returns the number of open viewer connections.
func (g *Gateway) Viewers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.viewers
}

// Subscribed returns the number of streams subscribed.
func (g *Gateway) Subscribed() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.hubs)
}

// tickInterval is how often Run emits reactions, sends pings that fall
// due and reaps idle streams.
const tickInterval = 250 * time.Millisecond

// Run reports viewer counts, sends viewers and reactions events and
// unsubscribes idle streams until ctx ends; it then unsubscribes all.
func (g *Gateway) Run(ctx context.Context) error {
	report := time.NewTicker(g.cfg.ReportInterval)
	defer report.Stop()
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			g.mu.Lock()
			hubs := g.hubs
			g.hubs = map[snowflake.ID]*hub{}
			g.mu.Unlock()
			for _, h := range hubs {
				h.stop(context.Background())
			}
			return nil
		case now := <-tick.C:
			for _, h := range g.snapshotHubs() {
				h.emitReactions(now)
				h.ping(now)
			}
			g.reap(ctx, now)
		case now := <-report.C:
			for _, h := range g.snapshotHubs() {
				h.report(ctx, now)
			}
		}
	}
}

func (g *Gateway) snapshotHubs() []*hub {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*hub, 0, len(g.hubs))
	for _, h := range g.hubs {
		out = append(out, h)
	}
	return out
}

// reap unsubscribes streams without viewers for Linger.
func (g *Gateway) reap(ctx context.Context, now time.Time) {
	var idle []*hub
	g.mu.Lock()
	for id, h := range g.hubs {
		if h.refs == 0 && now.Sub(h.idleSince) >= g.cfg.Linger {
			delete(g.hubs, id)
			idle = append(idle, h)
		}
	}
	g.mu.Unlock()
	for _, h := range idle {
		h.stop(ctx)
	}
}
