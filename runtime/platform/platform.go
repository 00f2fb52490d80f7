package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/gatewayrole"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/guildrole"
	"github.com/concord-chat/concord/runtime/httpserve"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store"
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

	// proc is the role side of the process (runtime/app): the roles of
	// package roles built into its group and muxes by New, run until
	// Close.
	proc *app.Process

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
	basics, err := app.OpenBasics(ctx, cfg, p.store, p.registry)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	key, ids := basics.Key, basics.IDs
	p.auth, p.counters = basics.Auth, basics.Counters
	if p.reads, err = openReadPath(ctx, cfg, p.registry); err != nil {
		return nil, err
	}
	// Every role, in one role.Build pass over the chat roles and the
	// table roles: the same Build functions as `concord serve`, every
	// seam in process. The guild role delivers to this process's gateway
	// (gatewayrole.LocalSink: the gateway role, built after it, sets its
	// node there) and allocates calls from the in-process voice fleet the
	// voice role adds its SFU to.
	p.proc = app.NewProcess(&p.seams)
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
	parts := role.Parts{Config: cfg, Logger: cfg.Logger, Metrics: p.registry, Store: p.store, Auth: p.auth, IDs: ids,
		Counters: p.counters, VoiceFleet: p.voiceFleet, AdminToken: cfg.AdminToken, Seams: p.proc.Seams, Admin: p.proc.Admin}
	built, err := p.proc.Build(ctx, app.DefaultTables(), func(string) bool { return true }, parts)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	p.guilds, p.gateway, p.bots = built.Guilds, built.Gateway, built.Bots
	if p.readStates, err = readstaterole.Open(ctx, parts); err != nil {
		return nil, fmt.Errorf("platform: read states: %w", err)
	}
	if p.bots == nil || built.REST == nil {
		return nil, errors.New("platform: the api role provided no bot platform or REST handler")
	}
	if cfg.DevUser {
		if p.DevToken, err = p.devUser(ctx, ids); err != nil {
			return nil, err
		}
	}
	// The roles' parts outlive New's context: they run until Close.
	p.proc.Start(ctx)
	// Bot identifies are refused until the lease manager hears
	// revocations: New returns once its watch started.
	select {
	case <-p.bots.Leases().Connected():
	case <-time.After(30 * time.Second):
		return nil, errors.New("platform: the revocation watch did not start within 30 s")
	}
	p.handler = app.Routes{
		Process: p.proc,
		Metrics: p.registry,
		Ready:   func() bool { return p.ready.Load() && p.proc.Ready() == nil },
		// The gateway role's drain is among the roles' admin endpoints.
		AdminToken: cfg.AdminToken,
		Gateway:    p.gateway,
		REST:       built.REST,
		Web:        web.Options{GatewayURL: cfg.PublicURL, VoiceEndpoints: p.voiceFleet.Endpoints, MediaSrc: cfg.WebMediaOrigins},
	}.Handler()
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

// Handler serves REST, the gateway and the operational endpoints.
func (p *Platform) Handler() http.Handler { return p.handler }

// Guilds returns the guild service (for in-process tests and tools).
func (p *Platform) Guilds() *guild.Service { return p.guilds }

// Store returns the store.
func (p *Platform) Store() store.Store { return p.store }

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
	err := p.proc.Serve(ctx, app.Serving{
		Server:   srv,
		Errc:     errc,
		Logger:   p.log,
		Timeout:  p.cfg.ShutdownTimeout,
		NotReady: func() { p.ready.Store(false) },
	})
	if err != nil {
		return fmt.Errorf("platform: %w", err)
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
	// The group closes the gateway role's node among its parts; the
	// seams close the chat roles' services (the guild service among
	// them) after the read path the parts published through.
	if p.proc != nil {
		errs = append(errs, p.proc.Stop(sctx, p.reads.close))
	} else {
		errs = append(errs, p.reads.close())
	}
	cancel()
	if p.counters != nil {
		errs = append(errs, p.counters.Close())
	}
	if p.store != nil {
		errs = append(errs, p.store.Close())
	}
	return errors.Join(errs...)
}
