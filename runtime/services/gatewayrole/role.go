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
// The ports (runtime/services/wiring) it consumes, as the process gives them:
//   - the guilds sessions subscribe to: the process's guild service
//     (wiring.GuildService) when every guild is here; with wiring.Placement
//     the guild nodes owning them, over wiring.GuildClient, resubscribed
//     when the ring moves a guild (backend.go), READY read from the store
//     by wiring.GuildReader.
//   - where guild events reach the sessions: it gives its node
//     (wiring.GatewayNode), which the process's sink delivers to when the
//     guilds are here; with wiring.Placement it serves GatewayNode
//     (Deliver, and the session directory: sessions.go).
//   - presence: wiring.PresenceGateway when the process has a presence
//     side; without it the gateway runs without presence.
//   - what the admission reads: the bot store (wiring.BotStore:
//     applications, privileged intents, READY's application,
//     entitlement grants), read states (wiring.ReadStates, when the process
//     has them), and the bots' identify counters (wiring.BotCounters, when
//     they are shared with every gateway counting the bot).
//   - bots' entitlement leases: the role runs the process's one lease
//     manager (leases.go) on the revocation path (wiring.Revocations), and
//     gives it (wiring.Leases).
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
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = registry.RoleGateway

// Role is the gateway role.
var Role = wiring.Role{Name: Name, Build: build,
	Needs: []string{wiring.BotStore.Name, wiring.Revocations.Name},
	Uses: []string{wiring.GuildService.Name, wiring.Placement.Name, wiring.GuildClient.Name, wiring.GuildReader.Name,
		wiring.PresenceGateway.Name, wiring.ReadStates.Name, wiring.BotCounters.Name},
	Gives: []string{wiring.GatewayNode.Name, wiring.Leases.Name},
}

// NodeKey is the process's gateway node (wiring.GatewayNode): the
// process's root path upgrades to it, drains it at shutdown, and the bot
// platform closes a user's sessions with it (CloseUser on a token
// reset). Parts built before the role reach it through
// wiring.LateOf(seams, NodeKey), set when it is built.
var NodeKey = wiring.GatewayNode

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
func build(ctx context.Context, b *wiring.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "gateway")
	var closers wiring.Closers
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
	ring, placed := wiring.Lookup(b.Seams, wiring.Placement)
	if !placed {
		svc, ok := wiring.Lookup(b.Seams, wiring.GuildService)
		if !ok {
			return errors.New("no guild service in the process to subscribe sessions on")
		}
		backend, voice = localBackend{GuildBackend: GuildBackend{Service: svc}, log: log}, svc
	} else {
		identify, ok := wiring.Lookup(b.Seams, wiring.GuildReader)
		client, ok2 := wiring.Lookup(b.Seams, wiring.GuildClient)
		if !ok || !ok2 {
			return errors.New("no guild reader and client in the process to subscribe sessions on the guild owners")
		}
		resub, err := resubscriptions(b.Metrics)
		if err != nil {
			return err
		}
		rb = newRingBackend(identify, b.Store, client, ring, cfg.CallTimeout, resub, log)
		backend, voice = rb, client
	}
	node := wiring.LateOf(b.Seams, NodeKey)
	apps, ok := wiring.Lookup(b.Seams, wiring.BotStore)
	if !ok {
		return errors.New("no bot store in the process")
	}
	leases, leasePart, err := openLeases(ctx, b, enforcer{node: node, backend: backend, members: b.Store, log: b.Logger.With("component", "entitlement")})
	if err != nil {
		return err
	}
	ac := admission.Config{Leases: leases, Apps: apps}
	// READY's read_state, where the process has read states.
	if rs, ok := wiring.Lookup(b.Seams, wiring.ReadStates); ok {
		ac.States = rs
	}
	// Bots' identify counters, when they are the ones every gateway
	// counting the bot shares: a bot's max_concurrency buckets and daily
	// budget span every gateway node.
	c, _ := wiring.Lookup(b.Seams, wiring.BotCounters)
	adm, err := newAdmission(cfg, backend, c, ac, b.Metrics, b.Logger.With("component", "identify"))
	if err != nil {
		return err
	}
	gwCfg := gateway.Config{Node: cfg.Node, PublicURL: cfg.PublicURL, Logger: log, Registerer: b.Metrics,
		OpHandlers: map[int]gateway.OpHandler{}}
	side, presence := wiring.Lookup(b.Seams, wiring.PresenceGateway)
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
	wiring.Provide(b.Seams, NodeKey, gw)
	wiring.Provide(b.Seams, wiring.Leases, leases)
	wiring.LateOf(b.Seams, wiring.Leases).Set(leases)
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
type adminMux struct{ b *wiring.Builder }

// Handle implements wiring.Mux.
func (m adminMux) Handle(pattern string, h http.Handler) { m.b.HandleAdmin(pattern, h) }
