package platform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/concord-chat/concord/runtime/adminauth"
	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/dataservice"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/gatewayrole"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/guildrole"
	"github.com/concord-chat/concord/runtime/httpserve"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/roles"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	cassandrastore "github.com/concord-chat/concord/runtime/store/cassandra"
	pebblestore "github.com/concord-chat/concord/runtime/store/pebble"
	"github.com/concord-chat/concord/runtime/voice/fleet"
	"github.com/concord-chat/concord/web"
)

// Platform is a running single-process Concord.
type Platform struct {
	cfg      Config
	log      *slog.Logger
	store    store.Store
	auth     *auth.Issuer
	guilds   *guild.Service
	gateway  *gateway.Node
	handler  http.Handler
	registry *prometheus.Registry
	ready    atomic.Bool
	reads    *readPath
	// readStates is the read-state seam: the readstate role's service,
	// built by the same Build as `concord serve --roles=readstate`.
	readStates *readstaterole.Backend
	// seams are the cross-role seams the roles share: in `concord dev`
	// every provider is in this process.
	seams    role.Seams
	counters counters.Counters
	// bots is the api role's bot platform (apirole.BotsKey).
	bots *apirole.Bots

	// voiceFleet holds the in-process SFUs; the web client's policy admits
	// their endpoints.
	voiceFleet *fleet.Local

	// The roles of package roles: built into group, roleMux and
	// roleAdmin (their admin endpoints) by New, run until Close.
	group              lifecycle.Group
	roleMux, roleAdmin *http.ServeMux

	closeOnce sync.Once
	closeErr  error

	// DevToken is the dev user's token when Config.DevUser is set.
	DevToken string
}

// New opens the backends and wires every role. Close releases them.
func New(ctx context.Context, cfg Config) (*Platform, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	p := &Platform{cfg: cfg, log: cfg.Logger, registry: prometheus.NewRegistry()}
	p.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.registry.MustRegister(httpserve.Collectors()...)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("platform: data dir: %w", err)
	}
	if err := p.checkBackends(); err != nil {
		return nil, err
	}
	if p.store, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	key, err := serverKey(cfg)
	if err != nil {
		return nil, err
	}
	if p.auth, err = auth.New(auth.Config{Key: key}, p.store); err != nil {
		return nil, fmt.Errorf("platform: auth: %w", err)
	}
	ids, err := snowflake.New(snowflake.Config{Worker: cfg.Worker, Process: cfg.Process, Registerer: p.registry})
	if err != nil {
		return nil, fmt.Errorf("platform: snowflake: %w", err)
	}
	if p.reads, err = openReadPath(ctx, cfg, p.registry); err != nil {
		return nil, err
	}
	// Every role, in one role.Build pass over the chat roles and the
	// table roles: the same Build functions as `concord serve`, every
	// seam in process. The guild role delivers to this process's gateway
	// (gatewayrole.LocalSink: the gateway role, built after it, sets its
	// node there) and allocates calls from the in-process voice fleet the
	// voice role adds its SFU to.
	p.roleMux, p.roleAdmin = http.NewServeMux(), http.NewServeMux()
	p.voiceFleet = fleet.NewLocal()
	role.Provide(&p.seams, readstaterole.LogKey, p.reads.log)
	role.Provide(&p.seams, guildrole.LocalSink, gatewayrole.LocalSink(&p.seams))
	gatewayNode := role.LateOf(&p.seams, gatewayrole.NodeKey)
	// The api role publishes through the read path's outbox, closes the
	// gateway's sessions of a bot whose token is reset, and limits REST
	// on the counters the gateway counts bots' identifies in.
	role.Provide(&p.seams, apirole.ServerKey, key)
	role.Provide(&p.seams, apirole.Outbox, p.reads.outbox)
	role.Provide(&p.seams, apirole.LocalGateway, func() *gateway.Node { n, _ := gatewayNode.Get(); return n })
	if p.counters, err = apirole.OpenCounters(ctx, cfg); err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	parts := role.Parts{Config: cfg, Logger: cfg.Logger, Metrics: p.registry, Store: p.store, Auth: p.auth, IDs: ids,
		Counters: p.counters, VoiceFleet: p.voiceFleet, AdminToken: cfg.AdminToken, Admin: p.roleAdmin, Seams: &p.seams}
	if err := role.Build(ctx, slices.Concat(roles.Chat, roles.Table), func(string) bool { return true }, parts, p.roleMux, &p.group); err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	var built bool
	if p.guilds, built = role.Lookup(&p.seams, guildrole.Service); !built {
		return nil, errors.New("platform: the guild role provided no guild service")
	}
	if p.readStates, err = readstaterole.Open(ctx, parts); err != nil {
		return nil, fmt.Errorf("platform: read states: %w", err)
	}
	if p.bots, built = role.Lookup(&p.seams, apirole.BotsKey); !built {
		return nil, errors.New("platform: the api role provided no bot platform")
	}
	if p.gateway, built = role.Lookup(&p.seams, gatewayrole.NodeKey); !built {
		return nil, errors.New("platform: the gateway role provided no gateway node")
	}
	if cfg.DevUser {
		if p.DevToken, err = p.devUser(ctx, ids); err != nil {
			return nil, err
		}
	}
	rest, built := role.Lookup(&p.seams, apirole.REST)
	if !built {
		return nil, errors.New("platform: the api role mounted no REST handler")
	}
	// The roles' parts outlive New's context: they run until Close.
	p.group.Start(ctx)
	// Bot identifies are refused until the lease manager hears
	// revocations: New returns once its watch started.
	select {
	case <-p.bots.Leases().Connected():
	case <-time.After(30 * time.Second):
		return nil, errors.New("platform: the revocation watch did not start within 30 s")
	}
	p.handler = p.routes(rest)
	p.ready.Store(true)
	ok = true
	return p, nil
}

// checkBackends refuses backend URLs this build cannot serve yet, with a
// clear message instead of silently using the embedded default.
func (p *Platform) checkBackends() error {
	for flag, v := range map[string]string{"--registry": p.cfg.Registry} {
		switch v {
		case "mem", "embedded":
		default:
			return fmt.Errorf("platform: %s=%s is not supported by this build yet (use the embedded default)", flag, v)
		}
	}
	return nil
}

func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	scheme, rest := backendScheme(cfg.Store)
	switch scheme {
	case "pebble":
		s, err := pebblestore.New(pebblestore.Config{Dir: rest, Logger: cfg.Logger.With("component", "store")})
		if err != nil {
			return nil, fmt.Errorf("platform: open pebble store %s: %w", rest, err)
		}
		return s, nil
	case "cassandra", "scylla":
		ccfg, err := cassandrastore.ParseURL(cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("platform: --store: %w", err)
		}
		cfg.ApplyCassandraAuth(&ccfg)
		ccfg.Logger = cfg.Logger.With("component", "store")
		// Connect retries with backoff while Cassandra is down; /readyz
		// answers 503 meanwhile when the listener serves a Gate.
		s, err := cassandrastore.Connect(ctx, ccfg)
		if err != nil {
			return nil, fmt.Errorf("platform: open cassandra store: %w", err)
		}
		return dataservice.Wrap(s, dataservice.New(s, dataservice.Config{Name: cfg.Node, Logger: cfg.Logger.With("component", "data")})), nil
	default:
		return nil, fmt.Errorf("platform: unknown --store %q (want pebble:DIR or cassandra://host:port/keyspace)", RedactURL(cfg.Store))
	}
}

// serverKey returns the token-signing key: the configured one, or the one
// kept in the data directory, created on first start.
func serverKey(cfg Config) ([]byte, error) {
	if cfg.ServerKey != "" {
		if len(cfg.ServerKey) < 32 {
			return nil, errors.New("platform: server key must be at least 32 bytes")
		}
		return []byte(cfg.ServerKey), nil
	}
	path := filepath.Join(cfg.DataDir, "server.key")
	if b, err := os.ReadFile(path); err == nil {
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) < 32 {
			return nil, fmt.Errorf("platform: %s is not a hex key of at least 32 bytes", path)
		}
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("platform: read server key: %w", err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("platform: generate server key: %w", err)
	}
	if err := writeFileSync(path, []byte(hex.EncodeToString(k)+"\n")); err != nil {
		return nil, fmt.Errorf("platform: write server key: %w", err)
	}
	return k, nil
}

// Handler serves REST, the gateway and the operational endpoints.
func (p *Platform) Handler() http.Handler { return p.handler }

// Guilds returns the guild service (for in-process tests and tools).
func (p *Platform) Guilds() *guild.Service { return p.guilds }

// Store returns the store.
func (p *Platform) Store() store.Store { return p.store }

func (p *Platform) routes(restAPI http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{}))
	HandleHealth(mux, func() bool { return p.ready.Load() && p.group.Ready() == nil })
	mux.Handle("/admin/", adminauth.Guard(p.cfg.AdminToken, role.AdminHandler(p.adminRoutes(), p.roleAdmin)))
	// discord.py's default gateway URL is the root path, so a WebSocket
	// upgrade anywhere outside /api goes to the gateway; the web client
	// (package web) answers GET and HEAD; other methods reach the REST
	// handler's JSON 404.
	webApp := web.Handler(web.Options{GatewayURL: p.cfg.PublicURL, VoiceEndpoints: p.voiceFleet.Endpoints, MediaSrc: p.cfg.WebMediaOrigins})
	fallback := UpgradeOr(p.gateway, WebOr(webApp, restAPI))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := p.roleMux.Handler(r); pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		fallback.ServeHTTP(w, r)
	}))
	return mux
}

// adminRoutes are the admin endpoints, served behind the admin token
// (off without Config.AdminToken).
func (p *Platform) adminRoutes() *http.ServeMux {
	// The gateway role's drain is among the roles' (p.roleAdmin).
	mux := http.NewServeMux()
	return mux
}

// Serve accepts connections on l until ctx ends, then shuts down
// gracefully within Config.ShutdownTimeout.
func (p *Platform) Serve(ctx context.Context, l net.Listener) error {
	srv := httpserve.NewServer(p.handler, p.cfg.ServingConfig())
	errc := make(chan error, 1)
	go func() { errc <- httpserve.Serve(srv, l, p.cfg.ServingConfig()) }()
	return p.Run(ctx, srv, errc)
}

// Run is Serve for a server that already runs (one that served a Gate
// while New connected the backends, the Gate now open to Handler): errc
// receives what its Serve returned. Run waits until ctx ends or the
// server fails, then shuts down gracefully within
// Config.ShutdownTimeout.
func (p *Platform) Run(ctx context.Context, srv *http.Server, errc <-chan error) error {
	var failed error
	select {
	case err := <-errc:
		return fmt.Errorf("platform: serve: %w", err)
	case failed = <-p.group.Failed():
		p.log.Error("a role failed; shutting down", "err", failed)
	case <-ctx.Done():
	}
	p.ready.Store(false)
	p.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	if p.gateway != nil {
		p.gateway.Drain(sctx)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("platform: shutdown: %w", err)
	}
	if failed != nil {
		return fmt.Errorf("platform: %w", failed)
	}
	return nil
}

// Close stops every role and closes the backends. Calls after the first
// return the first's result.
func (p *Platform) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *Platform) close() error {
	var errs []error
	sctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	// The group closes the gateway role's node among its parts.
	errs = append(errs, p.group.Stop(sctx))
	cancel()
	// The seams close the chat roles' services (the guild service among
	// them) after the parts that call them.
	errs = append(errs, p.reads.close(), p.seams.Close())
	if p.counters != nil {
		errs = append(errs, p.counters.Close())
	}
	if p.store != nil {
		errs = append(errs, p.store.Close())
	}
	return errors.Join(errs...)
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
