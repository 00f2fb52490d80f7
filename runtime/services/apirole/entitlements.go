package apirole

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Revocations is the process's revocation path, opened once per process
// (OpenRevocations) and shared by the two sides of bots' entitlement
// leases: the bot platform, which publishes a revocation when an
// installation, a token or a permission is taken away, and the gateway
// role, which runs the process's one lease manager (Leases) on the
// grants (Source) and the pushes (Bus). Fault injectors sit in front of
// both and pass everything through until a test or a measurement arms
// them.
//
// The bus is the process's registry in `concord serve`; in `concord dev`
// it is an embedded etcd the pushes travel through (in memory with
// --registry=mem).
type Revocations struct {
	source *entitlement.FaultySource
	bus    *entitlement.FaultyBus
	// leases is the process's lease manager, set by the gateway role
	// when it runs here.
	leases *wiring.Late[*entitlement.Manager]
	// etcd is the embedded registry of `concord dev` (nil otherwise).
	etcd *embeddedEtcd
	// timeout bounds a publish without a lease manager in the process.
	timeout time.Duration
}

// revocationsKey is the process's Revocations.
var revocationsKey = wiring.Key[*Revocations]{Name: "bots/revocations"}

// OpenRevocations returns the process's revocation path, opening it on
// first use (closed with the process's seams): the grants are read from
// the process's bot store (BotStore) and the user store, the pushes
// travel on the registry's entitlement bus.
func OpenRevocations(ctx context.Context, p wiring.Parts) (*Revocations, error) {
	return wiring.Shared(p.Seams, revocationsKey, func() (*Revocations, func() error, error) {
		apps, err := BotStore(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		bus, ee, stop, err := openBus(p)
		if err != nil {
			return nil, nil, err
		}
		r := &Revocations{
			source:  entitlement.NewFaultySource(NewInstallSource(apps, p.Store), 1),
			bus:     entitlement.NewFaultyBus(bus),
			leases:  wiring.LateOf(p.Seams, wiring.Leases),
			etcd:    ee,
			timeout: 5 * time.Second,
		}
		return r, func() error { stop(); return nil }, nil
	})
}

// openBus opens the bus revocations travel on: the process's registry
// when it has one, else (`concord dev`) an embedded etcd in
// <DataDir>/registry, or an in-memory bus with --registry=mem. stop
// releases what it started.
func openBus(p wiring.Parts) (entitlement.Bus, *embeddedEtcd, func(), error) {
	cfg := p.Config
	log := p.Logger.With("component", "entitlement")
	switch {
	case p.Registry != nil:
		bus, err := entitlement.NewRegistryBus(p.Registry, entitlement.DefaultPrefix)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("apirole: revocation bus: %w", err)
		}
		return bus, nil, func() {}, nil
	case cfg.Registry == "mem":
		return entitlement.NewMemBus(), nil, func() {}, nil
	case cfg.Registry == "" || cfg.Registry == "embedded":
		dir := filepath.Join(cfg.DataDir, "registry")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, nil, fmt.Errorf("apirole: registry dir: %w", err)
		}
		ee := &embeddedEtcd{dir: dir}
		if err := ee.start(); err != nil {
			return nil, nil, nil, err
		}
		reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ee.endpoint}, Logger: p.Logger.With("component", "registry")})
		if err != nil {
			ee.halt()
			return nil, nil, nil, fmt.Errorf("apirole: registry client: %w", err)
		}
		bus, err := entitlement.NewRegistryBus(reg, entitlement.DefaultPrefix)
		if err != nil {
			_ = reg.Close()
			ee.halt()
			return nil, nil, nil, fmt.Errorf("apirole: revocation bus: %w", err)
		}
		return bus, ee, func() {
			if err := reg.Close(); err != nil {
				log.Warn("registry client close failed", "err", err)
			}
			ee.halt()
		}, nil
	default:
		return nil, nil, nil, fmt.Errorf("apirole: --registry=%s is not supported by this build (use embedded or mem)", cfg.Registry)
	}
}

// Source is where the lease manager reads bots' grants.
func (r *Revocations) Source() entitlement.Source { return r.source }

// Bus is the bus the lease manager receives revocations on.
func (r *Revocations) Bus() entitlement.Bus { return r.bus }

// embeddedEtcd is the process's embedded etcd server, which tests stop and
// start again (at the same address, with the same data) to take the
// registry away for real.
type embeddedEtcd struct {
	dir, endpoint string
	mu            sync.Mutex
	stop          func()
}

// start runs the server, at e.endpoint once it is known.
func (e *embeddedEtcd) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stop != nil {
		return nil
	}
	stop, ep, err := etcdreg.StartEmbedded(ctx, e.dir, e.endpoint)
	if err != nil {
		return fmt.Errorf("apirole: embedded registry: %w", err)
	}
	e.stop, e.endpoint = stop, ep
	return nil
}

// halt stops the server if it runs.
func (e *embeddedEtcd) halt() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// Revoked implements bots.Revocations: it pushes the revocation to every
// gateway node, through the process's lease manager when the gateway
// role runs here (which counts the publish), else on the bus itself.
func (r *Revocations) Revoked(ctx context.Context, rv bots.Revocation) error {
	kind := map[bots.RevocationKind]entitlement.Kind{
		bots.RevokedInstall: entitlement.KindUninstall, bots.RevokedToken: entitlement.KindTokenReset,
		bots.RevokedPermissions: entitlement.KindPermissions,
	}[rv.Kind]
	if kind == "" {
		return fmt.Errorf("apirole: revocation kind %d unknown", rv.Kind)
	}
	e := entitlement.Revocation{Kind: kind, ApplicationID: rv.ApplicationID,
		BotUserID: rv.BotUserID, GuildID: rv.GuildID, TokenGeneration: rv.TokenGeneration}
	if mgr, ok := r.leases.Get(); ok && mgr != nil {
		return mgr.Publish(ctx, e)
	}
	e.ID, e.At = entitlement.NewID(), time.Now().UnixNano()
	// A registry that does not answer must not hold up the uninstall or
	// reset that publishes: the leases apply the revocation anyway.
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.bus.Publish(ctx, e); err != nil {
		return fmt.Errorf("apirole: push revocation: %w", err)
	}
	return nil
}

// installSource reads a bot's grant: its token generation (user store),
// and of the guilds it is a member of those whose installation record of
// its application exists (bot store) and those without one (Unentitled). One renewal costs 2 + G reads for
// a bot in G guilds; the bot → application binding never changes and is
// cached.
type installSource struct {
	apps  bots.Store
	users store.Store

	mu    sync.Mutex
	appOf map[snowflake.ID]snowflake.ID
}

// Grant implements entitlement.Source.
func (s *installSource) Grant(ctx context.Context, bot snowflake.ID) (entitlement.Grant, error) {
	app, err := s.application(ctx, bot)
	if err != nil {
		return entitlement.Grant{}, err
	}
	u, err := s.users.GetUser(ctx, bot)
	if errors.Is(err, store.ErrNotFound) {
		return entitlement.Grant{}, fmt.Errorf("bot user %d: %w", bot, entitlement.ErrNotGoverned)
	}
	if err != nil {
		return entitlement.Grant{}, fmt.Errorf("token generation of %d: %w", bot, err)
	}
	guilds, err := s.users.UserGuilds(ctx, bot)
	if err != nil {
		return entitlement.Grant{}, fmt.Errorf("guilds of %d: %w", bot, err)
	}
	g := entitlement.Grant{ApplicationID: app, TokenGeneration: u.TokenGeneration, Guilds: make([]snowflake.ID, 0, len(guilds))}
	for _, id := range guilds {
		_, err := s.apps.GetInstallation(ctx, id, app)
		switch {
		case err == nil:
			g.Guilds = append(g.Guilds, id)
		case errors.Is(err, bots.ErrNotFound):
			g.Unentitled = append(g.Unentitled, id)
		default:
			return entitlement.Grant{}, fmt.Errorf("installation of %d in guild %d: %w", app, id, err)
		}
	}
	return g, nil
}

// application returns the bot's application, ErrNotGoverned for a user
// that is none's bot.
func (s *installSource) application(ctx context.Context, bot snowflake.ID) (snowflake.ID, error) {
	s.mu.Lock()
	app, ok := s.appOf[bot]
	s.mu.Unlock()
	if ok {
		return app, nil
	}
	a, err := s.apps.ApplicationByBot(ctx, bot)
	if errors.Is(err, bots.ErrNotFound) {
		return 0, fmt.Errorf("user %d: %w", bot, entitlement.ErrNotGoverned)
	}
	if err != nil {
		return 0, fmt.Errorf("application of %d: %w", bot, err)
	}
	s.mu.Lock()
	if s.appOf == nil || len(s.appOf) > 1<<16 {
		s.appOf = map[snowflake.ID]snowflake.ID{}
	}
	s.appOf[bot] = a.ID
	s.mu.Unlock()
	return a.ID, nil
}

// Faults are the fault injectors of the bot platform's revocation path,
// for tests and measurements: they pass everything through until armed.
type Faults struct {
	// Source delays or fails the grant reads of lease renewals.
	Source *entitlement.FaultySource
	// Bus drops publishes or takes the push channel down.
	Bus *entitlement.FaultyBus
	// Registry is the embedded etcd the pushes travel through in
	// `concord dev`; nil with --registry=mem or a given bus.
	Registry *EmbeddedRegistry
}

// EmbeddedRegistry is the process's embedded etcd, stopped and started
// again (same address, same data) to take the registry away for real.
type EmbeddedRegistry struct{ e *embeddedEtcd }

// Stop stops the server if it runs.
func (r *EmbeddedRegistry) Stop() { r.e.halt() }

// Start runs the server again at its address.
func (r *EmbeddedRegistry) Start() error { return r.e.start() }

// Faults returns the revocation path's fault injectors.
func (b *Bots) Faults() Faults {
	f := Faults{Source: b.revocations.source, Bus: b.revocations.bus}
	if b.revocations.etcd != nil {
		f.Registry = &EmbeddedRegistry{e: b.revocations.etcd}
	}
	return f
}

// NewInstallSource is the entitlement.Source both modes read bots' grants
// from: the token generation in users, and the installations in apps
// (see installSource). A `concord serve` gateway node builds its lease
// manager on it.
func NewInstallSource(apps bots.Store, users store.Store) entitlement.Source {
	return &installSource{apps: apps, users: users}
}
