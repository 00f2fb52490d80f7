package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/edge/httpserve"
	"github.com/concord-chat/concord/runtime/services/apirole"
	"github.com/concord-chat/concord/runtime/services/dataservice"
	"github.com/concord-chat/concord/runtime/services/guildrole"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/readstaterole"
	"github.com/concord-chat/concord/runtime/services/relayrole"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/web"
)

// Node is one running Concord process, `concord dev` and `concord serve`
// alike: the roles its configuration names, built in one pass over the
// role tables on the backends it opened, served on its listeners. With
// --registry=mem every role runs in this process and every seam is
// in-process (`concord dev`'s default); with a registry (etcd, or an
// embedded etcd) the node registers under a lease, claims its snowflake
// pair and reaches the roles it does not run over gRPC.
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *prometheus.Registry
	ready   atomic.Bool
	// stopTracing flushes the spans the process still holds.
	stopTracing func(context.Context) error

	// reg is the registry (nil with --registry=mem); stopReg stops an
	// embedded etcd.
	reg     registry.Registry
	stopReg func()
	// snowflakeLost is closed if the node's snowflake claim is lost;
	// Serve then stops.
	snowflakeLost <-chan struct{}

	// inProc: the node runs every role of its tables, so every seam is
	// in this process and it opens no registry (`concord dev`).
	inProc bool
	store  store.Store
	// roleStore is the store as the roles use it: message reads and
	// writes go to the data ring with --data-nodes=ring.
	roleStore  store.Store
	dataRng    *registry.LocalRing
	dataClient transport.DataClient
	events     *EventLog
	basics     Basics
	adminToken string
	readStates *readstaterole.Backend
	voiceFleet *fleet.Local

	proc  *Process
	built Built

	httpL, grpcL, adminL net.Listener
	// gate answers on the HTTP listener from Open on: probes and 503
	// while the backends connect, then the node's handler.
	gate    *Gate
	srv     *http.Server
	srvErr  chan error
	grpc    *transport.Server
	handler http.Handler
	routes  Routes

	devToken  string
	closeOnce sync.Once
	closeErr  error
}

// Config is the process configuration (runtime/config).
type Config = config.Config

// Options are what the caller adds to a Config.
type Options struct {
	// Tables are the role tables the node builds from; zero:
	// DefaultTables.
	Tables Tables
	// HTTP is an HTTP listener the caller bound; nil binds Config.HTTP.
	HTTP net.Listener
}

// Open checks cfg, binds the listeners (the HTTP one answers at once,
// with a Gate, while the backends connect), opens the backends and
// builds the roles cfg.Roles names in one wiring.Build pass, starts their
// parts and opens the Gate to the node's handler. Serve registers the
// node and serves; Close releases everything.
func Open(ctx context.Context, cfg Config, opts Options) (_ *Node, err error) {
	if opts.Tables.Chat == nil && opts.Tables.Table == nil {
		opts.Tables = DefaultTables()
	}
	var inProc bool
	if cfg, inProc, err = Check(cfg, opts.Tables); err != nil {
		if opts.HTTP != nil {
			opts.HTTP.Close()
		}
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.Node), metrics: prometheus.NewRegistry(), stopReg: func() {}, httpL: opts.HTTP, inProc: inProc}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := registerPodMetrics(n.metrics, cfg); err != nil {
		return nil, err
	}
	if n.stopTracing, err = tracing.Setup(ctx, cfg.Tracing, cfg.Node, cfg.Roles); err != nil {
		return nil, err
	}
	if err := n.listen(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := n.openBackends(ctx); err != nil {
		return nil, err
	}
	if err := n.build(ctx, opts.Tables); err != nil {
		return nil, err
	}
	if cfg.DevUser {
		if n.devToken, err = n.devUser(ctx); err != nil {
			return nil, err
		}
	}
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// start starts the roles' parts (they run until Close) and, once the
// bot platform's lease manager hears revocations (bot identifies are
// refused until then), opens the HTTP listener's Gate to the node's
// handler. /readyz answers 200 once Serve reports the node ready.
func (n *Node) start(ctx context.Context) error {
	n.proc.Start(ctx)
	if b := n.built.Bots; b != nil && b.Leases() != nil {
		select {
		case <-b.Leases().Connected():
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("the revocation watch did not start within 30 s")
		}
	}
	n.gate.Open(n.handler)
	return nil
}

// listen binds the HTTP listener (unless the caller gave one) and starts
// serving the Gate on it, then binds the admin listener and, for the
// roles that serve gRPC, the gRPC one.
func (n *Node) listen() error {
	cfg := n.cfg
	if n.httpL == nil {
		l, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTP, err)
		}
		n.httpL = l
	}
	n.gate = &Gate{}
	if tp := cfg.Serving.TrustedProxies; len(tp) > 0 {
		// Every client listener of the process (this one, the admin and
		// voice listeners) takes the client's address from these.
		cfg.Logger.Info("client addresses from trusted proxies", "trusted_proxies", tp)
	}
	n.srv = httpserve.NewServer(n.gate, cfg.ServingConfig())
	n.srvErr = make(chan error, 3)
	go func() { n.srvErr <- httpserve.Serve(n.srv, n.httpL, cfg.ServingConfig()) }()
	var err error
	if cfg.Admin != "" {
		if n.adminL, err = net.Listen("tcp", cfg.Admin); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Admin, err)
		}
	}
	if !n.inProc && servesGRPC(cfg) {
		if n.grpcL, err = net.Listen("tcp", cfg.GRPC); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.GRPC, err)
		}
	}
	return nil
}

// openBackends opens the registry (with the snowflake claim), the store
// (behind the data ring with --data-nodes=ring), the key, token issuer,
// id generator and counters, and the event log with its outbox.
func (n *Node) openBackends(ctx context.Context) error {
	cfg := n.cfg
	var err error
	if !n.inProc {
		reg, stop, err := openRegistry(ctx, cfg)
		if err != nil {
			return err
		}
		n.reg, n.stopReg = reg, stop
		if cfg, n.snowflakeLost, err = claimSnowflake(ctx, n.reg, cfg); err != nil {
			return err
		}
		n.cfg = cfg
	}
	if n.store, err = OpenStore(ctx, cfg); err != nil {
		return err
	}
	// st is the store of the roles: its message methods go to the data
	// nodes with --data-nodes=ring.
	st := n.store
	if cfg.DataNodes == config.DataRing {
		if n.dataRng, err = registry.NewLocalRing(ctx, n.reg, registry.RoleData, registry.LocalRingConfig{Logger: n.log.With("component", "ring")}); err != nil {
			return fmt.Errorf("data ring: %w", err)
		}
		// Retry long enough to outlast a dead data node's lease: the ring
		// names the new owner once the registry dropped it.
		attempts := 6 + int(cfg.LeaseTTL/time.Second) + 1
		if n.dataClient, err = transport.NewDataClient(
			transport.ClientConfig{CallTimeout: cfg.CallTimeout, Logger: n.log.With("component", "data-client")},
			transport.DataClientConfig{MaxAttempts: attempts}, n.dataRng); err != nil {
			return fmt.Errorf("data client: %w", err)
		}
		st = dataservice.Wrap(n.store, n.dataClient)
	}
	if n.basics, err = OpenBasics(ctx, cfg, st, n.metrics); err != nil {
		return err
	}
	n.roleStore = st
	n.adminToken = cfg.AdminToken
	if n.adminToken == "" && !n.inProc {
		// Nodes of a cluster and the operator share the admin token
		// derived from the token key.
		n.adminToken = adminauth.Derive(n.basics.Key)
	}
	// The event log, opened once per process, and its outbox: the guild
	// role's REST API publishes message events through the outbox, the
	// read-state role counts mentions from the log (in one process the
	// persisted in-process log by default; in a cluster the shared Kafka
	// log) and the live roles of a cluster append to and consume the
	// same Kafka log. One outbox per node name in a cluster, so that
	// processes sharing a data directory do not share a queue.
	if n.inProc || kafkaLog(cfg.EventLog) && (has(cfg, registry.RoleGuild) || has(cfg, readstaterole.Name)) {
		dir := filepath.Join(cfg.DataDir, "outbox")
		switch {
		case !n.inProc && !has(cfg, registry.RoleGuild):
			dir = "" // publishes nothing
		case !n.inProc:
			dir = filepath.Join(dir, cfg.Node)
		}
		lcfg := cfg
		lcfg.Logger = n.log
		if n.events, err = OpenEventLog(ctx, lcfg, readstaterole.LogSpec(cfg.EventLog), dir, n.metrics); err != nil {
			return err
		}
	}
	return nil
}

// build builds the node's roles in one wiring.Build pass over the tables
// and, in a cluster, the gRPC server over what they registered.
func (n *Node) build(ctx context.Context, t Tables) error {
	cfg := n.cfg
	var svc transport.Services
	svc.Node = cfg.Node
	n.proc = NewProcess(nil)
	parts := wiring.Parts{Config: cfg, Logger: n.log, Metrics: n.metrics, Registry: n.reg, Store: n.roleStore, Auth: n.basics.Auth,
		IDs: n.basics.IDs, Counters: n.basics.Counters, AdminToken: n.adminToken, Seams: n.proc.Seams, Admin: n.proc.Admin}
	if !n.inProc {
		parts.GRPC = &svc
		parts.ClientConfig = transport.ClientConfig{CallTimeout: cfg.CallTimeout, Errors: guildrole.Errors, Logger: n.log.With("component", "transport")}
	}
	// The ports the root decides, each once: in process or remote.
	if err := n.givePorts(ctx, parts); err != nil {
		return err
	}
	// The presence role is built on every node taking part in presence
	// (presencerole.Joins), not only on --roles=presence nodes.
	var err error
	n.built, err = n.proc.Build(ctx, t, func(name string) bool {
		return has(cfg, name) || name == presencerole.Name && presencerole.Joins(cfg)
	}, parts)
	if err != nil {
		return err
	}
	if n.grpcL != nil {
		if n.grpc, err = transport.NewServer(transport.ServerConfig{Errors: guildrole.Errors, Logger: n.log.With("component", "transport")}, svc); err != nil {
			return fmt.Errorf("grpc server: %w", err)
		}
	}
	n.routes = Routes{
		Process: n.proc,
		// Go and process collectors, the HTTP listeners', the store's
		// and the transport's metrics live in the default registry;
		// /metrics serves both.
		Metrics:    prometheus.Gatherers{n.metrics, prometheus.DefaultGatherer},
		Ready:      func() bool { return n.ready.Load() && n.proc.Ready() == nil },
		AdminToken: n.adminToken,
		REST:       n.built.REST,
		// The web client answers GET and HEAD outside the server's paths;
		// its policy admits the endpoints of the SFUs calls go to.
		Web: web.Options{GatewayURL: cfg.PublicURL, MediaSrc: cfg.WebMediaOrigins},
	}
	if v, ok := wiring.Lookup(n.proc.Seams, wiring.Voice); ok {
		n.routes.Web.VoiceEndpoints = v.Endpoints
	}
	if n.built.Gateway != nil {
		n.routes.Gateway = n.built.Gateway
	}
	if cfg.Admin == "" {
		n.handler = n.routes.Handler()
	} else {
		mux := http.NewServeMux()
		n.routes.Operational(mux)
		n.routes.Public(mux)
		n.handler = mux
	}
	return nil
}

// servesGRPC reports whether cfg runs a role other nodes call over gRPC
// (every role but api and the live and voice roles).
func servesGRPC(cfg Config) bool {
	for _, r := range []string{registry.RoleGateway, registry.RoleGuild, registry.RoleData, readstaterole.Name, presencerole.Name, relayrole.Name} {
		if has(cfg, r) {
			return true
		}
	}
	return false
}

// unwrapStore returns the adapter under the coalescing wrappers.
func unwrapStore(s store.Store) store.Store {
	for {
		u, ok := s.(interface{ Unwrap() store.Store })
		if !ok {
			return s
		}
		s = u.Unwrap()
	}
}

// Config returns the node's configuration (completed, its snowflake
// pair final).
func (n *Node) Config() Config { return n.cfg }

// Handler serves REST, the gateway, the web client and the operational
// endpoints (and /admin/ when the node has no admin listener).
func (n *Node) Handler() http.Handler { return n.handler }

// HTTPAddr is the address the HTTP listener is bound to.
func (n *Node) HTTPAddr() string { return n.httpL.Addr().String() }

// AdminAddr is the address the admin listener is bound to ("" without one:
// the admin endpoints are then on the HTTP listener).
func (n *Node) AdminAddr() string {
	if n.adminL == nil {
		return ""
	}
	return n.adminL.Addr().String()
}

// GRPCAddr is the address the gRPC listener is bound to ("" without one).
func (n *Node) GRPCAddr() string {
	if n.grpcL == nil {
		return ""
	}
	return n.grpcL.Addr().String()
}

// DevToken is the dev user's token when Config.DevUser is set.
func (n *Node) DevToken() string { return n.devToken }

// Store is the node's store as the roles use it.
func (n *Node) Store() store.Store { return n.roleStore }

// Guilds is the guild role's service (nil when the node does not run it).
func (n *Node) Guilds() *guild.Service { return n.built.Guilds }

// Gateway is the gateway role's node (nil when the node does not run it).
func (n *Node) Gateway() *gateway.Node { return n.built.Gateway }

// Bots is the bot platform (nil on a node without the guild role).
func (n *Node) Bots() *apirole.Bots { return n.built.Bots }

// Seams are the node's cross-role seams.
func (n *Node) Seams() *wiring.Seams { return n.proc.Seams }

// Registry is the node's registry (nil with --registry=mem).
func (n *Node) Registry() registry.Registry { return n.reg }

// Metrics is the node's own metrics registry.
func (n *Node) Metrics() *prometheus.Registry { return n.metrics }

// Auth is the node's token issuer.
func (n *Node) Auth() *auth.Issuer { return n.basics.Auth }

// Counters are the node's counters.
func (n *Node) Counters() counters.Counters { return n.basics.Counters }

// ReadStates is the node's read-state seam (nil where it has none).
func (n *Node) ReadStates() *readstaterole.Backend { return n.readStates }

// Events is the node's event log with its outbox (nil where it has none).
func (n *Node) Events() *EventLog { return n.events }

// Close stops every role and releases the backends and listeners. Calls
// after the first return the first's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	// No call from another node reaches a part being closed.
	if n.grpc != nil {
		n.grpc.Stop()
	}
	// The HTTP server is shut down by Serve; after a failed Open (or
	// without Serve) it is closed here.
	if n.srv != nil {
		n.srv.Close()
	}
	// The roles' parts first, in reverse order (the group closes the
	// gateway role's node among them); then what the node opened for
	// them; then the rings and clients the roles shared, and the chat
	// roles' services (the guild service among them).
	var closers []func() error
	if n.basics.Counters != nil {
		closers = append(closers, n.basics.Counters.Close)
	}
	if n.dataClient != nil {
		closers = append(closers, n.dataClient.Close)
	}
	if n.dataRng != nil {
		closers = append(closers, func() error { n.dataRng.Close(); return nil })
	}
	closers = append(closers, n.events.Close)
	if n.proc != nil {
		errs = append(errs, n.proc.Stop(sctx, closers...))
	} else {
		for _, c := range closers {
			errs = append(errs, c())
		}
	}
	for _, l := range []net.Listener{n.httpL, n.adminL, n.grpcL} {
		if l != nil {
			l.Close()
		}
	}
	if n.reg != nil {
		errs = append(errs, n.reg.Close())
	}
	n.stopReg()
	if n.stopTracing != nil {
		errs = append(errs, n.stopTracing(sctx))
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
