// Package gatewayrole is the gateway role, built by the same Build in
// `concord dev` and in `concord serve --roles=gateway`: the WebSocket
// gateway (runtime/gateway) behind one identify admission
// (runtime/admission: throttle, 4014, 4011, bots' counters and
// entitlement leases, READY's application and read_state), op 4 sent to
// the guild, the drain and session hand-off on the admin endpoints, the
// takeover of a session another gateway node holds when its RESUME lands
// here (takeover.go), and the /gateway routes (the process's root path
// upgrades to it too, through Node).
//
// The seams, by mode:
//   - the guilds sessions subscribe to: in `concord dev` the process's
//     guild service (guildrole.Service); in `concord serve` the guild
//     nodes owning them, over guildrole.Client, resubscribed when the
//     ring moves a guild (backend.go).
//   - where guild events reach the sessions: in `concord dev` the guild
//     role, built before this one, delivers to LocalSink, which reaches
//     the node this role builds; in `concord serve` the role serves
//     GatewayNode (Deliver, and the session directory: sessions.go).
//   - presence: presencerole.GatewayKey when the process has a presence
//     side; without it the gateway runs without presence.
//   - what the admission reads: the process's bot store
//     (apirole.BotStore: applications, privileged intents, READY's
//     application, entitlement grants), read states (readstaterole.Open;
//     in `concord serve` with the shared Kafka event log), and the bots'
//     identify counters (role.Parts.Counters; in `concord serve` only
//     when they are shared, --redis).
//   - bots' entitlement leases: the role runs the process's one lease
//     manager (leases.go) on the bot platform's grants and revocation
//     bus (apirole.OpenRevocations), and provides it (apirole.Leases).
package gatewayrole

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/concord-chat/concord/runtime/admission"
	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/guildrole"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/presencerole"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
)

// Name is the role's --roles name.
const Name = registry.RoleGateway

// Role is the gateway role.
var Role = role.Role{Name: Name, Build: build}

// Seams this role provides and consumes.
var (
	// NodeKey is the process's gateway node, provided when the role runs
	// in the process: the process's root path upgrades to it, drains it
	// at shutdown, and the bot platform closes a user's sessions with it
	// (CloseUser on a token reset). Parts built before the role reach it
	// through role.LateOf(seams, NodeKey), set when it is built.
	NodeKey = role.Key[*gateway.Node]{Name: "gateway/node"}
)

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
	if b.Dev() {
		svc, ok := role.Lookup(b.Seams, guildrole.Service)
		if !ok {
			return errors.New("no guild service in the process to subscribe sessions on")
		}
		backend, voice = localBackend{GatewayBackend: guild.NewGatewayBackend(svc), log: log}, svc
	} else {
		// Identify only reads the store; this service never loads an
		// actor, so it needs no working sink.
		identify, err := guild.NewService(guild.Config{Logger: b.Logger.With("component", "identify")},
			guild.Deps{Store: b.Store, Sink: discardSink{}, IDs: b.IDs, Auth: b.Auth})
		if err != nil {
			return fmt.Errorf("identify service: %w", err)
		}
		closers.Add(identify.Close)
		client, err := guildrole.Client(ctx, b.Parts)
		if err != nil {
			return fmt.Errorf("guild client: %w", err)
		}
		ring, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
		if err != nil {
			return err
		}
		resub, err := resubscriptions(b.Metrics)
		if err != nil {
			return err
		}
		rb = newRingBackend(guild.NewGatewayBackend(identify), b.Store, client, ring, cfg.CallTimeout, resub, log)
		backend, voice = rb, client
	}
	node := role.LateOf(b.Seams, NodeKey)
	apps, err := apirole.BotStore(ctx, b.Parts)
	if err != nil {
		return fmt.Errorf("bot store: %w", err)
	}
	leases, leasePart, err := openLeases(ctx, b, enforcer{node: node, backend: backend, members: b.Store, log: b.Logger.With("component", "entitlement")})
	if err != nil {
		return err
	}
	ac := admission.Config{Leases: leases, Apps: apps}
	// READY's read_state: in `concord serve` the read-state role is fed
	// from the shared Kafka log, without which there is none.
	if b.Dev() || strings.HasPrefix(cfg.EventLog, "kafka://") {
		if ac.States, err = readstaterole.Open(ctx, b.Parts); err != nil {
			return fmt.Errorf("read states: %w", err)
		}
	}
	// Bots' identify counters: the process's; in `concord serve` only
	// shared ones (--redis), as a bot's max_concurrency buckets and daily
	// budget span every gateway node.
	var c counters.Counters
	if b.Dev() || cfg.Redis != "mem" {
		c = b.Counters
	}
	adm, err := newAdmission(cfg, backend, c, ac, b.Metrics, b.Logger.With("component", "identify"))
	if err != nil {
		return err
	}
	gwCfg := gateway.Config{Node: cfg.Node, PublicURL: cfg.PublicURL, Logger: log, Registerer: b.Metrics,
		OpHandlers: map[int]gateway.OpHandler{}}
	side, presence := role.Lookup(b.Seams, presencerole.GatewayKey)
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
	role.Provide(b.Seams, apirole.Leases, leases)
	role.LateOf(b.Seams, apirole.Leases).Set(leases)
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
	if !b.Dev() {
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
