// Package gatewayrole is the gateway role, built by the same Build in
// `concord dev` and in `concord serve --roles=gateway`: the WebSocket
// gateway (runtime/edge/gateway) behind one identify admission
// (runtime/edge/admission: throttle, 4014, 4011, bots' counters and
// entitlement leases, READY's application and read_state), op 4 sent to
// the guild, the drain and session hand-off on the admin endpoints, the
// takeover of a session another gateway node holds when its RESUME lands
// here (takeover.go), and the /gateway routes (the process's root path
// upgrades to it too, through Node).
//
// The ports (runtime/services/role) it consumes, as the process gives them:
//   - the guilds sessions subscribe to: the process's guild service
//     (role.GuildService) when every guild is here; with role.Placement
//     the guild nodes owning them, over role.GuildClient, resubscribed
//     when the ring moves a guild (backend.go), READY read from the store
//     by role.GuildReader.
//   - where guild events reach the sessions: it gives its node
//     (role.GatewayNode), which the process's sink delivers to when the
//     guilds are here; with role.Placement it serves GatewayNode
//     (Deliver, and the session directory: sessions.go).
//   - presence: role.PresenceGateway when the process has a presence
//     side; without it the gateway runs without presence.
//   - what the admission reads: the bot store (role.BotStore:
//     applications, privileged intents, READY's application,
//     entitlement grants), read states (role.ReadStates, when the process
//     has them), and the bots' identify counters (role.BotCounters, when
//     they are shared with every gateway counting the bot).
//   - bots' entitlement leases: the role runs the process's one lease
//     manager (leases.go) on the revocation path (role.Revocations), and
//     gives it (role.Leases).
package gatewayrole

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/admission"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/role"
)

// Name is the role's --roles name.
const Name = registry.RoleGateway

// Role is the gateway role.
var Role = role.Role{Name: Name, Build: build,
	Needs: []string{role.BotStore.Name, role.Revocations.Name},
	Uses: []string{role.GuildService.Name, role.Placement.Name, role.GuildClient.Name, role.GuildReader.Name,
		role.PresenceGateway.Name, role.ReadStates.Name, role.BotCounters.Name},
	Gives: []string{role.GatewayNode.Name, role.Leases.Name},
}

// NodeKey is the process's gateway node (role.GatewayNode): the
// process's root path upgrades to it, drains it at shutdown, and the bot
// platform closes a user's sessions with it (CloseUser on a token
// reset). Parts built before the role reach it through
// role.LateOf(seams, NodeKey), set when it is built.
var NodeKey = role.GatewayNode

// guildSessions is what the role asks of the guilds behind the gateway:
// the gateway.Backend, and detaching one guild of a session (a revoked
// entitlement), after which no event of the guild reaches it.
type guildSessions interface {
	gateway.Backend
	dropGuild(ctx context.Context, s event.Session, guildID snowflake.ID)
}

// build builds the backend on the guilds, the admission with its leases,
// the node with its presence side and op 4, the drain, the routes and,
// in `concord serve`, the GatewayNode services.
func build(ctx context.Context, b *role.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "gateway")
	var closers role.Closers
	defer func() {
		if err != nil {
			_ = closers.Close()
		}
	}()
	var (
		backend guildSessions
		rb      *ringBackend
		voice   voiceGuilds
	)
	ring, placed := role.Lookup(b.Seams, role.Placement)
	if !placed {
		svc, ok := role.Lookup(b.Seams, role.GuildService)
		if !ok {
			return errors.New("no guild service in the process to subscribe sessions on")
		}
		backend, voice = localBackend{GuildBackend: GuildBackend{Service: svc}, log: log}, svc
	} else {
		identify, ok := role.Lookup(b.Seams, role.GuildReader)
		client, ok2 := role.Lookup(b.Seams, role.GuildClient)
		if !ok || !ok2 {
			return errors.New("no guild reader and client in the process to subscribe sessions on the guild owners")
		}
		resub, err := resubscriptions(b.Metrics)
		if err != nil {
			return err
		}
		rb = newRingBackend(GuildBackend{Service: identify}, b.Store, client, ring, cfg.CallTimeout, resub, log)
		backend, voice = rb, client
	}
	node := role.LateOf(b.Seams, NodeKey)
	apps, ok := role.Lookup(b.Seams, role.BotStore)
	if !ok {
		return errors.New("no bot store in the process")
	}
	leases, leasePart, err := openLeases(ctx, b, enforcer{node: node, backend: backend, members: b.Store, log: b.Logger.With("component", "entitlement")})
	if err != nil {
		return err
	}
	ac := admission.Config{Leases: leases, Apps: apps}
	// READY's read_state, where the process has read states.
	if rs, ok := role.Lookup(b.Seams, role.ReadStates); ok {
		ac.States = rs
	}
	// Bots' identify counters, when they are the ones every gateway
	// counting the bot shares: a bot's max_concurrency buckets and daily
	// budget span every gateway node.
	c, _ := role.Lookup(b.Seams, role.BotCounters)
	adm, err := newAdmission(cfg, backend, c, ac, b.Metrics, b.Logger.With("component", "identify"))
	if err != nil {
		return err
	}
	gwCfg := gateway.Config{Node: cfg.Node, PublicURL: cfg.PublicURL, Logger: log, Registerer: b.Metrics,
		OpHandlers: map[int]gateway.OpHandler{}}
	side, presence := role.Lookup(b.Seams, role.PresenceGateway)
	presence = presence && side.Presence != nil
	if presence {
		gwCfg.Presence, gwCfg.OpHandlers = side.Presence, side.Presence.OpHandlers()
	}
	gwCfg.OpHandlers[gateway.OpVoiceStateUpdate] = voiceStateHandler(voice, log)
	gw, err := gateway.NewNode(gwCfg, adm)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	// The node closes after the loops that use it (parts stop in
	// reverse), then what it used.
	closers.Add(gw.Close)
	if err := b.Add(lifecycle.Part{Name: "node", Close: closers.Close}); err != nil {
		return err
	}
	node.Set(gw)
	role.Provide(b.Seams, NodeKey, gw)
	role.Provide(b.Seams, role.Leases, leases)
	role.LateOf(b.Seams, role.Leases).Set(leases)
	if err := b.Add(leasePart); err != nil {
		return err
	}
	if presence {
		for _, p := range side.Parts(gw) {
			if err := b.Add(p); err != nil {
				return err
			}
		}
	}
	d := &drainer{node: gw, reg: b.Registry, self: cfg.Node, log: log}
	if placed {
		gw.SetHandoffBackend(rb)
		d.handoff = true
		d.token = b.AdminToken
		// A RESUME that lands on this node takes the session from the
		// node holding it (takeover.go).
		if err := setupTakeover(ctx, b, gw, log); err != nil {
			return err
		}
		if b.GRPC != nil {
			b.GRPC.Gateway, b.GRPC.Sessions = leavingSink{next: gw, backend: rb}, rb
		}
		if err := b.Add(lifecycle.Part{Name: "follow-ring", Run: func(ctx context.Context) error {
			rb.follow(ctx, cfg.RetryInterval)
			return nil
		}}); err != nil {
			return err
		}
	}
	// Readiness is off from the start of a drain: the load balancer
	// stops sending new connections.
	if err := b.Add(lifecycle.Part{Name: "drain", Ready: d.ready}); err != nil {
		return err
	}
	d.routes(adminMux{b})
	b.Handle("/gateway", gw)
	b.Handle("/gateway/", gw)
	return nil
}

// adminMux puts routes among the process's admin endpoints.
type adminMux struct{ b *role.Builder }

// Handle implements role.Mux.
func (m adminMux) Handle(pattern string, h http.Handler) { m.b.HandleAdmin(pattern, h) }
