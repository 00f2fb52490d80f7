// Package apirole is the public REST surface of Concord, built by the
// same Build functions in `concord dev` and in `concord serve`: the REST
// API (runtime/edge/api) and the bot platform (runtime/domain/bots: applications,
// commands, interactions, installs, entitlement leases) in front of the
// guild actors, GET /gateway/bot and the REST rate limits.
//
// It is two roles of the role table:
//   - GuildREST, named like the guild role and built wherever it runs:
//     the REST API and the bot platform against the process's guild
//     service (wiring.GuildService). In `concord serve` it answers only for
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
// The ports (runtime/services/wiring) it consumes, as the process gives them:
//   - the guild actors: wiring.GuildService (GuildREST runs only where the
//     guild role runs); with wiring.Placement the api role reaches the
//     guild nodes over HTTP, by the route tables api.Routes and
//     bots.Routes export, and GuildREST answers only for the node's
//     guilds.
//   - the guild statistics of the admin endpoints: served by the guild
//     role; an api node without it answers them for the cluster from the
//     guild nodes' (adminstats.go).
//   - the event log's outbox (wiring.Outbox); absent, message events are
//     not logged. Read states (wiring.ReadStates) where the process has
//     them.
//   - the gateway (wiring.LocalGateway): the process's gateway node, whose
//     sessions the bot platform closes on a token reset, when the
//     process gives one.
//   - the bot store (wiring.BotStore) and the revocation path (the grants
//     of bots' entitlement leases and the bus their revocations travel
//     on, the registry's), both opened once per process by the root
//     (BotStore, OpenRevocations); the gateway role runs the process's
//     one lease manager on that path (wiring.Leases) and the bot platform
//     publishes through it, or on the bus itself in a process without
//     the gateway role.
//   - given: the bot platform (Bots), the counters of the rate limits
//     (Counters) and the handler on /api/ (wiring.REST), which the
//     process's root fallback answers other methods with.
package apirole

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/edge/api"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the api role's --roles name.
const Name = registry.RoleAPI

// Role is the api role: the public REST endpoint.
var Role = wiring.Role{Name: Name, Build: buildAPI,
	Needs: []string{wiring.BotStore.Name},
	Uses:  []string{surfaceKey.Name, wiring.GuildService.Name, wiring.Placement.Name},
	Gives: []string{wiring.REST.Name},
}

// GuildREST is the guild's REST surface, built wherever the guild role
// runs (it carries the guild role's name) and after it.
var GuildREST = wiring.Role{Name: registry.RoleGuild, Build: buildGuildREST,
	Needs: []string{wiring.GuildService.Name, wiring.ServerKey.Name, wiring.BotStore.Name, wiring.Revocations.Name},
	Uses:  []string{wiring.Outbox.Name, wiring.ReadStates.Name, wiring.LocalGateway.Name, wiring.Placement.Name},
	Gives: []string{surfaceKey.Name, BotsKey.Name},
}

// Seams this package consumes and provides.
var (
	// BotsKey is the process's bot platform, provided by GuildREST.
	BotsKey = wiring.Key[*Bots]{Name: "api/bots"}
	// Counters are the counters of the REST limits and of GET
	// /gateway/bot: the process's (wiring.Parts.Counters) when it has them,
	// else opened from --redis by the api role.
	Counters = wiring.Key[counters.Counters]{Name: "api/counters"}
	// surfaceKey is GuildREST's handler, which the api role serves.
	surfaceKey = wiring.Key[http.Handler]{Name: "api/guild-surface"}
	// botStoreKey is the process's bot store (BotStore).
	botStoreKey = wiring.Key[bots.Store]{Name: "bots/store"}
)

// buildGuildREST builds the REST API and the bot platform against the
// process's guild service and provides them (see the package comment).
func buildGuildREST(ctx context.Context, b *wiring.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "api")
	svc, ok := wiring.Lookup(b.Seams, wiring.GuildService)
	if !ok {
		return errors.New("no guild service in the process: the guild role builds before its REST surface")
	}
	key, ok := wiring.Lookup(b.Seams, wiring.ServerKey)
	if !ok {
		return errors.New("no server key in the process")
	}
	apps, ok := wiring.Lookup(b.Seams, wiring.BotStore)
	if !ok {
		return errors.New("no bot store in the process")
	}
	objs, err := OpenObjects(ctx, cfg)
	if err != nil {
		return err
	}
	deps := api.Deps{Store: b.Store, Guilds: svc, Auth: b.Auth, IDs: b.IDs, Objects: objs, AttachmentKey: AttachmentKey(key)}
	if ob, logged := wiring.Lookup(b.Seams, wiring.Outbox); logged {
		deps.Events = ob
	}
	if rs, ok := wiring.Lookup(b.Seams, wiring.ReadStates); ok {
		// Acks and READY's read states; MESSAGE_ACK goes through the
		// guild service's DispatchToUser (in a cluster it reaches the
		// user's sessions on every gateway node through the session
		// directory).
		deps.ReadStates = rs
		deps.Users = svc
	}
	bd := botDeps{store: b.Store, apps: apps, guilds: svc, auth: b.Auth, ids: b.IDs, registry: b.Metrics}
	// Revocations reach the gateways' lease manager on the process's
	// revocation path (the root opened it with OpenRevocations).
	path, _ := wiring.Lookup(b.Seams, wiring.Revocations)
	if bd.revocations, ok = path.(*Revocations); !ok {
		return fmt.Errorf("the process's revocation path %T is not the bot platform's", path)
	}
	if node, ok := wiring.Lookup(b.Seams, wiring.LocalGateway); ok {
		bd.node = node
	}
	ring, placed := wiring.Lookup(b.Seams, wiring.Placement)
	if placed {
		// A send the api node retried after its first owner died is
		// answered with the message that node wrote, if it did (retry.go).
		deps.PriorSend = (&sendDeduper{store: b.Store, log: log}).priorSend
	}
	bp, err := wiring.Shared(b.Seams, BotsKey, func() (*Bots, func() error, error) {
		bp, err := openBots(ctx, cfg, b.Logger, key, bd)
		if err != nil {
			return nil, nil, err
		}
		return bp, bp.Close, nil
	})
	if err != nil {
		return err
	}
	deps.MemberRemoved = bp.memberRemoved(svc.Bots, guildBotFlags(svc))
	restAPI := api.New(api.Config{GatewayURL: cfg.PublicURL, MaxFileBytes: cfg.MaxFileBytes, Logger: log}, deps)
	surface := http.NewServeMux()
	bp.Routes(surface, restAPI)
	if !placed {
		wiring.Provide[http.Handler](b.Seams, surfaceKey, surface)
		return nil
	}
	res := newResolver(b.Store)
	res.interactions = apps
	owned := &guildREST{node: cfg.Node, owns: transport.OwnedBy(ring, cfg.Node), res: res, api: surface, log: log}
	wiring.Provide[http.Handler](b.Seams, surfaceKey, owned)
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
func buildAPI(ctx context.Context, b *wiring.Builder) error {
	cfg := b.Config
	c, err := wiring.Shared(b.Seams, Counters, func() (counters.Counters, func() error, error) {
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
	surface, local := wiring.Lookup(b.Seams, surfaceKey)
	var flags *BotFlags
	_, placed := wiring.Lookup(b.Seams, wiring.Placement)
	if !placed {
		svc, ok := wiring.Lookup(b.Seams, wiring.GuildService)
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
	if placed && local {
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
func proxyTo(ctx context.Context, b *wiring.Builder, mux *http.ServeMux) error {
	cfg := b.Config
	ring, ok := wiring.Lookup(b.Seams, wiring.Placement)
	if !ok {
		return errors.New("no guild placement ring to forward requests by")
	}
	// Interactions route by their guild, read from the bot store.
	apps, ok := wiring.Lookup(b.Seams, wiring.BotStore)
	if !ok {
		return errors.New("no bot store in the process")
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
func clusterStatsTo(ctx context.Context, b *wiring.Builder) error {
	ring, ok := wiring.Lookup(b.Seams, wiring.Placement)
	if !ok {
		return errors.New("no guild placement ring to ask the guild nodes by")
	}
	s := &clusterStats{ring: ring, token: b.AdminToken, timeout: b.Config.CallTimeout, client: &http.Client{},
		log: b.Logger.With("component", "guild-stats")}
	s.routes(b.HandleAdmin)
	return nil
}

// mount serves h on /api/ and provides it as the process's REST handler.
func mount(b *wiring.Builder, h http.Handler) {
	h = route.DefaultVersion(h)
	b.Handle("/api/", h)
	wiring.Provide(b.Seams, wiring.REST, h)
}
