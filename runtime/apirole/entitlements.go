package apirole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	etcdreg "github.com/concord-chat/concord/runtime/registry/etcd"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/wire"
)

// entitlements is the revocation path of the process: the registry the
// pushes travel through (embedded etcd by default, in memory with
// --registry=mem), the lease Manager with its loop, and fault injectors
// in front of the Source and the Bus that pass everything through until a
// test or a measurement arms them.
type entitlements struct {
	mgr    *entitlement.Manager
	source *entitlement.FaultySource
	bus    *entitlement.FaultyBus
	close  func()
	// etcd is the embedded registry (nil with --registry=mem).
	etcd *embeddedEtcd
}

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

// entitlementDeps are what openEntitlements needs from the process.
type entitlementDeps struct {
	apps     bots.Store
	users    store.Store
	guilds   *guild.Service
	node     func() *gateway.Node
	registry prometheus.Registerer
	// bus, when set, carries the revocations instead of the registry
	// --registry names.
	bus entitlement.Bus
}

// openEntitlements starts the registry for pushes, the Manager and its
// loop.
func openEntitlements(cfg config.Config, logger *slog.Logger, d entitlementDeps) (*entitlements, error) {
	log := logger.With("component", "entitlement")
	var bus entitlement.Bus
	var ee *embeddedEtcd
	stop := func() {}
	switch {
	case d.bus != nil:
		bus = d.bus
	case cfg.Registry == "mem":
		bus = entitlement.NewMemBus()
	case cfg.Registry == "" || cfg.Registry == "embedded":
		dir := filepath.Join(cfg.DataDir, "registry")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("apirole: registry dir: %w", err)
		}
		ee = &embeddedEtcd{dir: dir}
		if err := ee.start(); err != nil {
			return nil, err
		}
		reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ee.endpoint}, Logger: logger.With("component", "registry")})
		if err != nil {
			ee.halt()
			return nil, fmt.Errorf("apirole: registry client: %w", err)
		}
		rb, err := entitlement.NewRegistryBus(reg, entitlement.DefaultPrefix)
		if err != nil {
			_ = reg.Close()
			ee.halt()
			return nil, fmt.Errorf("apirole: revocation bus: %w", err)
		}
		bus = rb
		stop = func() {
			if err := reg.Close(); err != nil {
				log.Warn("registry client close failed", "err", err)
			}
			ee.halt()
		}
	default:
		return nil, fmt.Errorf("apirole: --registry=%s is not supported by this build (use embedded or mem)", cfg.Registry)
	}
	e := &entitlements{
		source: entitlement.NewFaultySource(&installSource{apps: d.apps, users: d.users}, 1),
		bus:    entitlement.NewFaultyBus(bus),
		etcd:   ee,
	}
	ec := cfg.Entitlements
	mgr, err := entitlement.New(entitlement.Config{TTL: ec.TTL, RetryEvery: ec.RetryEvery, Grace: ec.Grace,
		Registerer: d.registry, Logger: log}, e.source, devEnforcer{guilds: d.guilds, node: d.node, log: log}, e.bus)
	if err != nil {
		stop()
		return nil, fmt.Errorf("apirole: entitlements: %w", err)
	}
	e.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); mgr.Run(ctx) }()
	e.close = func() {
		cancel()
		<-done
		stop()
	}
	// Bot identifies are refused until revocations are received: wait
	// for the first listing so the process starts ready for them.
	select {
	case <-mgr.Connected():
	case <-time.After(30 * time.Second):
		e.close()
		return nil, fmt.Errorf("apirole: revocation watch did not start within 30 s")
	}
	return e, nil
}

// Revoked implements bots.Revocations: it pushes the revocation to every
// gateway node.
func (e *entitlements) Revoked(ctx context.Context, r bots.Revocation) error {
	kind := map[bots.RevocationKind]entitlement.Kind{
		bots.RevokedInstall: entitlement.KindUninstall, bots.RevokedToken: entitlement.KindTokenReset,
		bots.RevokedPermissions: entitlement.KindPermissions,
	}[r.Kind]
	if kind == "" {
		return fmt.Errorf("apirole: revocation kind %d unknown", r.Kind)
	}
	return e.mgr.Publish(ctx, entitlement.Revocation{Kind: kind, ApplicationID: r.ApplicationID,
		BotUserID: r.BotUserID, GuildID: r.GuildID, TokenGeneration: r.TokenGeneration})
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

// devEnforcer acts on the sessions of this process's gateway node through
// the guild service.
type devEnforcer struct {
	guilds *guild.Service
	node   func() *gateway.Node
	log    *slog.Logger
}

// RevokeGuild implements entitlement.Enforcer: it detaches the session
// from the guild's actor, then asks the actor whether the bot is still a
// member. The question queues behind the detach, so when it returns no
// event of the guild can reach the session any more. When the bot is no
// longer a member the actor already sent GUILD_DELETE with the removal;
// otherwise (the guild tier never applied the uninstall) GUILD_DELETE is
// sent here, last.
func (e devEnforcer) RevokeGuild(ctx context.Context, s event.Session, guildID snowflake.ID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.guilds.DetachSession(ctx, guildID, s); err != nil {
		e.log.Warn("revoked guild not detached", "session_id", s.ID, "guild_id", guildID, "err", err)
	}
	_, err := e.guilds.GuildInfo(ctx, s.UserID, guildID)
	if errors.Is(err, guild.ErrMissingAccess) || errors.Is(err, guild.ErrUnknownGuild) {
		return
	}
	n := e.node()
	if n == nil {
		return
	}
	if err := n.SendTo(s.ID, "GUILD_DELETE", mustJSON(wire.UnavailableGuild{ID: guildID})); err != nil &&
		!errors.Is(err, gateway.ErrUnknownSession) {
		e.log.Warn("GUILD_DELETE not sent", "session_id", s.ID, "guild_id", guildID, "err", err)
	}
}

// CloseBot implements entitlement.Enforcer: 4004 (not resumable) when
// the token or application is gone, 4000 (reconnect) when the lease could
// not be renewed within the grace period. The guild tier forgets the
// sessions too.
func (e devEnforcer) CloseBot(ctx context.Context, bot snowflake.ID, reason entitlement.Reason) int {
	code, text := gateway.CloseUnknownError, "entitlements unavailable"
	switch reason {
	case entitlement.ReasonTokenReset:
		code, text = gateway.CloseAuthenticationFailed, "token reset"
	case entitlement.ReasonApplicationGone:
		code, text = gateway.CloseAuthenticationFailed, "application removed"
	}
	for _, s := range e.guilds.UserSessions(bot) {
		e.guilds.Disconnect(ctx, s)
	}
	n := e.node()
	if n == nil {
		return 0
	}
	return n.CloseUser(ctx, bot, code, text)
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
	f := Faults{Source: b.leases.source, Bus: b.leases.bus}
	if b.leases.etcd != nil {
		f.Registry = &EmbeddedRegistry{e: b.leases.etcd}
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
