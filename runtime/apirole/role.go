// Package apirole is the public REST surface of Concord, built by the
// same Build functions in `concord dev` and in `concord serve`: the REST
// API (runtime/api) and the bot platform (runtime/bots: applications,
// commands, interactions, installs, entitlement leases) in front of the
// guild actors, GET /gateway/bot and the REST rate limits.
//
// It is two roles of the role table:
//   - GuildREST, named like the guild role and built wherever it runs:
//     the REST API and the bot platform against the process's guild
//     service (guildrole.Service). In `concord serve` it answers only for
//     the guilds the placement ring gives the node (guildrest.go: a
//     request for another node's guild gets a 503 the api node retries
//     on the owner), and a node without the api role serves it on /api/
//     itself.
//   - Role ("api"): the public endpoint, behind the rate limits (on the
//     process's counters), with GET /gateway/bot. In `concord dev` it
//     serves the in-process GuildREST; in `concord serve` it forwards
//     each request to the guild node owning what it acts on (proxy.go,
//     route.go, spool.go), except the requests another api node
//     forwarded to this one's GuildREST.
//
// The seams, by mode:
//   - the guild actors: guildrole.Service in process (GuildREST runs only
//     where the guild role runs); in `concord serve` the api role reaches
//     the other guild nodes over HTTP, by the route tables api.Routes
//     and bots.Routes export.
//   - the guild statistics of the admin endpoints: served by the guild
//     role; an api node of `concord serve` without it answers them for
//     the cluster from the guild nodes' (adminstats.go).
//   - the event log's outbox (Outbox): provided by the process (dev: the
//     read path's; serve: the guild node's, with --eventlog=kafka://);
//     absent, message events are not logged.
//   - the gateway (LocalGateway): in `concord dev` the process's gateway
//     node, whose sessions the bot platform closes on a token reset; none
//     in `concord serve`.
//   - revocations: the process's revocation path (OpenRevocations: the
//     grants of bots' entitlement leases and the bus their revocations
//     travel on, the registry's), shared with the gateway role, which
//     runs the process's one lease manager on it (Leases); the bot
//     platform publishes through that manager, or on the bus itself in
//     a process without the gateway role.
//   - provided: the bot store (BotStore, one per process; the gateway
//     reads applications from it), the bot platform (Bots), the counters
//     of the rate limits (Counters) and the handler on /api/ (REST),
//     which the process's root fallback answers other methods with.
package apirole

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/api"
	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guildrole"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
)

// Name is the api role's --roles name.
const Name = registry.RoleAPI

// Role is the api role: the public REST endpoint.
var Role = role.Role{Name: Name, Build: buildAPI}

// GuildREST is the guild's REST surface, built wherever the guild role
// runs (it carries the guild role's name) and after it.
var GuildREST = role.Role{Name: registry.RoleGuild, Build: buildGuildREST}

// Seams this package consumes and provides.
var (
	// ServerKey is the process's token-signing key, provided by the
	// process: the bot platform signs interaction tokens with it and the
	// attachment URLs are signed with a key derived from it.
	ServerKey = role.Key[[]byte]{Name: "server-key"}
	// Outbox is the event log's outbox (guildrole.Outbox): the guild
	// service writes message changes with their events through it, and
	// the REST API publishes the events it logs outside a write.
	Outbox = guildrole.Outbox
	// LocalGateway returns the process's gateway node in `concord dev`
	// (nil until it exists), provided by the process.
	LocalGateway = role.Key[func() *gateway.Node]{Name: "gateway/node"}
	// BotsKey is the process's bot platform, provided by GuildREST.
	BotsKey = role.Key[*Bots]{Name: "api/bots"}
	// Leases is the process's one entitlement lease manager, provided by
	// the gateway role, which runs it on the process's revocation path
	// (OpenRevocations); the bot platform publishes through it.
	Leases = role.Key[*entitlement.Manager]{Name: "api/leases"}
	// Counters are the counters of the REST limits and of GET
	// /gateway/bot: the process's (role.Parts.Counters) when it has them,
	// else opened from --redis by the api role.
	Counters = role.Key[counters.Counters]{Name: "api/counters"}
	// REST is the handler the process serves on /api/, provided by the
	// role that mounted it.
	REST = role.Key[http.Handler]{Name: "api/rest"}
	// surfaceKey is GuildREST's handler, which the api role serves.
	surfaceKey = role.Key[http.Handler]{Name: "api/guild-surface"}
	// botStoreKey is the process's bot store (BotStore).
	botStoreKey = role.Key[bots.Store]{Name: "bots/store"}
)

// buildGuildREST builds the REST API and the bot platform against the
// process's guild service and provides them (see the package comment).
func buildGuildREST(ctx context.Context, b *role.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "api")
	svc, ok := role.Lookup(b.Seams, guildrole.Service)
	if !ok {
		return errors.New("no guild service in the process: the guild role builds before its REST surface")
	}
	key, ok := role.Lookup(b.Seams, ServerKey)
	if !ok {
		return errors.New("no server key in the process")
	}
	apps, err := BotStore(ctx, b.Parts)
	if err != nil {
		return err
	}
	objs, err := OpenObjects(ctx, cfg)
	if err != nil {
		return err
	}
	deps := api.Deps{Store: b.Store, Guilds: svc, Auth: b.Auth, IDs: b.IDs, Objects: objs, AttachmentKey: AttachmentKey(key)}
	ob, logged := role.Lookup(b.Seams, Outbox)
	if logged {
		deps.Events = ob
	}
	if b.Dev() || logged {
		// Acks and READY's read states; MESSAGE_ACK goes through the
		// guild service's DispatchToUser (in `concord serve` it reaches
		// the user's sessions on every gateway node through the session
		// directory).
		if deps.ReadStates, err = readstaterole.Open(ctx, b.Parts); err != nil {
			return fmt.Errorf("read states: %w", err)
		}
		deps.Users = svc
	}
	bd := botDeps{store: b.Store, apps: apps, guilds: svc, auth: b.Auth, ids: b.IDs, registry: b.Metrics}
	// Revocations reach the gateways' lease manager on the process's
	// revocation path.
	if bd.revocations, err = OpenRevocations(ctx, b.Parts); err != nil {
		return err
	}
	if b.Dev() {
		if node, ok := role.Lookup(b.Seams, LocalGateway); ok {
			bd.node = node
		}
	} else {
		// A send the api node retried after its first owner died is
		// answered with the message that node wrote, if it did (retry.go).
		deps.PriorSend = (&sendDeduper{store: b.Store, log: log}).priorSend
	}
	bp, err := role.Shared(b.Seams, BotsKey, func() (*Bots, func() error, error) {
		bp, err := openBots(ctx, cfg, b.Logger, key, bd)
		if err != nil {
			return nil, nil, err
		}
		return bp, bp.Close, nil
	})
	if err != nil {
		return err
	}
	deps.MemberRemoved = bp.memberRemoved(svc, guildBotFlags(svc))
	restAPI := api.New(api.Config{GatewayURL: cfg.PublicURL, MaxFileBytes: cfg.MaxFileBytes, Logger: log}, deps)
	surface := http.NewServeMux()
	bp.Routes(surface, restAPI)
	if b.Dev() {
		role.Provide[http.Handler](b.Seams, surfaceKey, surface)
		return nil
	}
	ring, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
	if err != nil {
		return err
	}
	res := newResolver(b.Store)
	res.interactions = apps
	owned := &guildREST{node: cfg.Node, owns: transport.OwnedBy(ring, cfg.Node), res: res, api: surface, log: log}
	role.Provide[http.Handler](b.Seams, surfaceKey, owned)
	if !slices.Contains(cfg.Roles, Name) {
		// No api role here to mount it: the node serves its guilds' REST
		// itself (the api nodes forward to it).
		mount(b, owned)
	}
	return nil
}

// buildAPI builds the public endpoint: GET /gateway/bot and, in `concord
// dev`, the in-process GuildREST or, in `concord serve`, the proxy to the
// guild owners, behind the rate limits.
func buildAPI(ctx context.Context, b *role.Builder) error {
	cfg := b.Config
	c, err := role.Shared(b.Seams, Counters, func() (counters.Counters, func() error, error) {
		if b.Counters != nil {
			return b.Counters, nil, nil // the process's, closed by it
		}
		cc := cfg
		cc.Logger = b.Logger
		c, err := OpenCounters(ctx, cc)
		if err != nil {
			return nil, nil, fmt.Errorf("api counters: %w", err)
		}
		return c, c.Close, nil
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	gb := GatewayBot{Auth: b.Auth, Store: b.Store, Counters: c, Concurrency: cfg.Identify.Concurrency,
		PublicURL: cfg.PublicURL, Logger: b.Logger.With("component", "gateway-bot")}
	for _, v := range []string{"/api/v9", "/api/v10"} {
		mux.Handle("GET "+v+"/gateway/bot", gb)
	}
	surface, local := role.Lookup(b.Seams, surfaceKey)
	var flags *BotFlags
	if b.Dev() {
		svc, ok := role.Lookup(b.Seams, guildrole.Service)
		if !ok || !local {
			return errors.New("no guild REST surface in the process: the guild role and GuildREST build before the api role")
		}
		mux.Handle("/", surface)
		flags = guildBotFlags(svc)
	} else {
		if err := proxyTo(ctx, b, mux); err != nil {
			return err
		}
		if !local {
			// No guild role here to answer the guild statistics: the
			// node answers them for the cluster (adminstats.go).
			if err := clusterStatsTo(ctx, b); err != nil {
				return err
			}
		}
		users := b.Store
		flags = NewBotFlags(func(ctx context.Context, id snowflake.ID) (bool, error) {
			u, err := users.GetUser(ctx, id)
			return u.Bot, err
		})
	}
	var h http.Handler = mux
	if !cfg.NoRateLimits {
		if h, err = rateLimit(b.Logger, c, b.Metrics, b.Auth, flags.IsBot, mux); err != nil {
			return err
		}
	}
	if !b.Dev() && local {
		// Another api node forwarded this request to the guild role here:
		// it was limited there, and is served here, not forwarded again.
		public := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(forwardedHeader) != "" {
				surface.ServeHTTP(w, r)
				return
			}
			public.ServeHTTP(w, r)
		})
	}
	mount(b, h)
	return nil
}

// proxyTo mounts the proxy to the guild owners on mux ("/").
func proxyTo(ctx context.Context, b *role.Builder, mux *http.ServeMux) error {
	cfg := b.Config
	ring, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
	if err != nil {
		return err
	}
	// Interactions route by their guild, read from the bot store.
	apps, err := BotStore(ctx, b.Parts)
	if err != nil {
		return err
	}
	m, err := newProxyMetrics(b.Metrics)
	if err != nil {
		return fmt.Errorf("proxy metrics: %w", err)
	}
	res := newResolver(b.Store)
	res.interactions = apps
	px := newProxy(ring, res, 2*cfg.LeaseTTL+time.Second, m, b.Logger.With("component", "proxy"))
	px.maxUpload = maxUploadBody(cfg)
	mux.Handle("/", px)
	return nil
}

// clusterStatsTo serves the cluster's guild statistics among the
// process's admin endpoints.
func clusterStatsTo(ctx context.Context, b *role.Builder) error {
	ring, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
	if err != nil {
		return err
	}
	s := &clusterStats{ring: ring, token: b.AdminToken, timeout: b.Config.CallTimeout, client: &http.Client{},
		log: b.Logger.With("component", "guild-stats")}
	s.routes(b.HandleAdmin)
	return nil
}

// mount serves h on /api/ and provides it as the process's REST handler.
func mount(b *role.Builder, h http.Handler) {
	b.Handle("/api/", h)
	role.Provide(b.Seams, REST, h)
}
