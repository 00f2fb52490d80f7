package app

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/apirole"
	"github.com/concord-chat/concord/runtime/services/liverole"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/readstaterole"
	"github.com/concord-chat/concord/runtime/services/role"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/voicerole"
)

// givePorts gives the roles the ports of role/ports.go the root decides,
// each once per process and before any role is built: in process when
// the process runs every role (n.inProc), remote otherwise. With the
// node's listeners and backends (node.go) it is the only code that asks
// which of the two the process is; the roles consume the ports and never
// ask. Each port is opened only when a role
// the process runs consumes it, and closed with the process's seams (or,
// for what the node opened itself, by Close).
func (n *Node) givePorts(ctx context.Context, parts role.Parts) error {
	cfg, s := n.cfg, parts.Seams
	runs := func(names ...string) bool {
		for _, r := range names {
			if has(cfg, r) {
				return true
			}
		}
		return false
	}
	ringCfg := registry.LocalRingConfig{Logger: n.log.With("component", "ring")}

	role.Provide(s, role.RawStore, unwrapStore(n.store))
	role.Provide(s, role.ServerKey, n.basics.Key)
	cs, onCassandra := unwrapStore(n.store).(*cassandra.Store)
	if onCassandra {
		role.Provide(s, role.Cassandra, cs)
	}
	if n.events != nil {
		if n.events.Outbox != nil {
			role.Provide(s, role.Outbox, n.events.Outbox)
		}
		role.Provide(s, role.EventLog, n.events.Log)
	}

	// Where guilds are and where their events go.
	if n.inProc {
		// Every guild is here and delivers to this process's gateway,
		// which the gateway role sets once built.
		gw := role.LateOf(s, role.GatewayNode)
		role.Provide[event.Sink](s, role.Sink, lateSink{gw})
		role.Provide(s, role.LocalGateway, func() *gateway.Node { g, _ := gw.Get(); return g })
	} else {
		if runs(registry.RoleGuild, registry.RoleAPI, registry.RoleGateway, readstaterole.Name, presencerole.Name) {
			// Opening it gives role.Placement.
			if _, err := role.Ring(ctx, s, n.reg, registry.RoleGuild, ringCfg); err != nil {
				return err
			}
		}
		if runs(registry.RoleGateway, readstaterole.Name, presencerole.Name) {
			ring, _ := role.Lookup(s, role.Placement)
			// Op 14 focus is replayed to a guild's new owner after it moved.
			c := transport.RememberFocus(transport.NewGuildClient(parts.ClientConfig, ring), n.log.With("component", "guild-client"))
			if _, err := role.Shared(s, role.GuildClient, func() (transport.GuildClient, func() error, error) { return c, c.Close, nil }); err != nil {
				return err
			}
		}
		if runs(registry.RoleGateway, readstaterole.Name) {
			// Identify's READY and the read-state role's channel mapping
			// read guilds from the store; this service loads no actor.
			r, err := guild.NewService(guild.Config{Logger: n.log.With("component", "guild-reader")},
				guild.Deps{Store: parts.Store, Sink: discardSink{}, IDs: parts.IDs, Auth: parts.Auth})
			if err != nil {
				return fmt.Errorf("guild reader: %w", err)
			}
			if _, err := role.Shared(s, role.GuildReader, func() (*guild.Service, func() error, error) { return r, r.Close, nil }); err != nil {
				return err
			}
		}
		if runs(registry.RoleGuild, presencerole.Name, "relay") {
			gwRing, err := role.Ring(ctx, s, n.reg, registry.RoleGateway, ringCfg)
			if err != nil {
				return err
			}
			c := transport.NewGatewayClient(parts.ClientConfig, gwRing)
			if _, err := role.Shared(s, role.Gateways, func() (transport.GatewayClient, func() error, error) { return c, c.Close, nil }); err != nil {
				return err
			}
			role.Provide[event.Sink](s, role.Sink, c)
			d := transport.NewSessionDirectory(parts.ClientConfig, role.RingRoster{LocalRing: gwRing})
			if _, err := role.Shared(s, role.Sessions, func() (transport.SessionDirectory, func() error, error) { return d, d.Close, nil }); err != nil {
				return err
			}
		}
	}

	// Read states: where a role calls them (the guild's acks, the
	// gateway's READY) or runs them; in a cluster they travel on the
	// shared Kafka log, without which there are none.
	if n.inProc || kafkaLog(cfg.EventLog) && runs(registry.RoleGuild, registry.RoleGateway, readstaterole.Name) {
		rs, err := readstaterole.Open(ctx, parts, !n.inProc)
		if err != nil {
			return fmt.Errorf("read states: %w", err)
		}
		role.Provide[role.ReadStateSeam](s, role.ReadStates, rs)
		n.readStates = rs
	}

	// Bots: one store and one revocation path per process.
	if runs(registry.RoleGuild, registry.RoleGateway, registry.RoleAPI) {
		apps, err := apirole.BotStore(ctx, parts)
		if err != nil {
			return fmt.Errorf("bot store: %w", err)
		}
		role.Provide(s, role.BotStore, apps)
	}
	if runs(registry.RoleGuild, registry.RoleGateway) {
		rev, err := apirole.OpenRevocations(ctx, parts)
		if err != nil {
			return fmt.Errorf("revocations: %w", err)
		}
		role.Provide[role.RevocationPath](s, role.Revocations, rev)
	}
	// Bots' identify counters: the process's, when every gateway counting
	// a bot counts on them (one process, or shared through --redis).
	if n.inProc || cfg.Redis != "mem" {
		role.Provide(s, role.BotCounters, n.basics.Counters)
	}

	// Voice: the guild places calls on the in-process fleet the voice
	// role adds its SFU to, or on the SFUs whose load reports the
	// registry holds.
	if runs(registry.RoleGuild) {
		key, err := voicerole.SigningKey(cfg, n.inProc)
		if err != nil {
			return err
		}
		v := role.VoicePort{Key: key}
		if n.inProc {
			n.voiceFleet = fleet.NewLocal()
			v.Allocator, v.Endpoints = n.voiceFleet, n.voiceFleet.Endpoints
			role.Provide(s, role.VoiceFleet, n.voiceFleet)
		} else {
			f := fleet.NewRegistry(n.reg, fleet.RegistryConfig{Logger: n.log.With("component", "voice-fleet")})
			v.Allocator, v.Endpoints, v.Run = f, f.Endpoints, f.Run
		}
		role.Provide(s, role.Voice, v)
	}
	if runs(voicerole.Name) {
		keys, err := voicerole.TrustedKeys(cfg, n.inProc)
		if err != nil {
			return err
		}
		role.Provide(s, role.VoiceKeys, keys)
		if !n.inProc {
			role.Provide[voice.LoadReporter](s, role.VoiceLoad, fleet.Reporter{Registry: n.reg})
		}
	}

	// Live comments: their backends, once per process, as the process's
	// live roles use them.
	var live []string
	for _, r := range cfg.Roles {
		if liverole.IsLive(r) {
			live = append(live, r)
		}
	}
	if len(live) > 0 {
		lb := liverole.BackendsConfig{Config: cfg, Logger: n.log, Roles: live, Embedded: n.inProc,
			Registry: n.reg, Counters: n.basics.Counters}
		if n.events != nil {
			lb.ChatLog = n.events.Log
		}
		lb.Cassandra = cs
		b, closeLive, err := liverole.OpenBackends(ctx, lb)
		if err != nil {
			return err
		}
		if _, err := role.Shared(s, liverole.BackendsPort, func() (liverole.Backends, func() error, error) { return b, closeLive, nil }); err != nil {
			return err
		}
	}
	return nil
}

// lateSink delivers to the process's gateway node once the gateway role
// set it; before then no session exists, so there is nothing to deliver.
type lateSink struct{ node *role.Late[*gateway.Node] }

// Deliver implements event.Sink.
func (s lateSink) Deliver(ctx context.Context, node string, b event.Batch) {
	if n, ok := s.node.Get(); ok {
		n.Deliver(ctx, node, b)
	}
}

// discardSink is the sink of the guild reader, which loads no actor and
// so never delivers.
type discardSink struct{}

// Deliver implements event.Sink.
func (discardSink) Deliver(context.Context, string, event.Batch) {}
