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
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/voicerole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// givePorts gives the roles the ports of role/ports.go the root decides,
// each once per process and before any role is built: in process when
// the process runs every role (n.inProc), remote otherwise. With the
// node's listeners and backends (node.go) it is the only code that asks
// which of the two the process is; the roles consume the ports and never
// ask. Each port is opened only when a role
// the process runs consumes it, and closed with the process's seams (or,
// for what the node opened itself, by Close).
func (n *Node) givePorts(ctx context.Context, parts wiring.Parts) error {
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

	wiring.Provide(s, wiring.RawStore, unwrapStore(n.store))
	wiring.Provide(s, wiring.ServerKey, n.basics.Key)
	cs, onCassandra := unwrapStore(n.store).(*cassandra.Store)
	if onCassandra {
		wiring.Provide(s, wiring.Cassandra, cs)
	}
	if n.events != nil {
		if n.events.Outbox != nil {
			wiring.Provide(s, wiring.Outbox, n.events.Outbox)
		}
		wiring.Provide(s, wiring.EventLog, n.events.Log)
	}

	// Where guilds are and where their events go.
	if n.inProc {
		// Every guild is here and delivers to this process's gateway,
		// which the gateway role sets once built.
		gw := wiring.LateOf(s, wiring.GatewayNode)
		wiring.Provide[event.Sink](s, wiring.Sink, lateSink{gw})
		wiring.Provide(s, wiring.LocalGateway, func() *gateway.Node { g, _ := gw.Get(); return g })
	} else {
		if runs(registry.RoleGuild, registry.RoleAPI, registry.RoleGateway, readstaterole.Name, presencerole.Name) {
			// Opening it gives wiring.Placement.
			if _, err := wiring.Ring(ctx, s, n.reg, registry.RoleGuild, ringCfg); err != nil {
				return err
			}
		}
		if runs(registry.RoleGateway, readstaterole.Name, presencerole.Name) {
			ring, _ := wiring.Lookup(s, wiring.Placement)
			// Op 14 focus is replayed to a guild's new owner after it moved.
			c := transport.RememberFocus(transport.NewGuildClient(parts.ClientConfig, ring), n.log.With("component", "guild-client"))
			if _, err := wiring.Shared(s, wiring.GuildClient, func() (transport.GuildClient, func() error, error) { return c, c.Close, nil }); err != nil {
				return err
			}
		}
		if runs(registry.RoleGateway, readstaterole.Name) {
			// Identify's READY and the read-state role's channel mapping
			// read guilds from the store, with no actor.
			wiring.Provide(s, wiring.GuildReader, guild.NewReader(parts.Store, parts.Auth))
		}
		if runs(registry.RoleGuild, presencerole.Name, "relay") {
			gwRing, err := wiring.Ring(ctx, s, n.reg, registry.RoleGateway, ringCfg)
			if err != nil {
				return err
			}
			c := transport.NewGatewayClient(parts.ClientConfig, gwRing)
			if _, err := wiring.Shared(s, wiring.Gateways, func() (transport.GatewayClient, func() error, error) { return c, c.Close, nil }); err != nil {
				return err
			}
			wiring.Provide[event.Sink](s, wiring.Sink, c)
			d := transport.NewSessionDirectory(parts.ClientConfig, wiring.RingRoster{LocalRing: gwRing})
			if _, err := wiring.Shared(s, wiring.Sessions, func() (transport.SessionDirectory, func() error, error) { return d, d.Close, nil }); err != nil {
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
		wiring.Provide[wiring.ReadStateSeam](s, wiring.ReadStates, rs)
		n.readStates = rs
	}

	// Bots: one store and one revocation path per process.
	if runs(registry.RoleGuild, registry.RoleGateway, registry.RoleAPI) {
		apps, err := apirole.BotStore(ctx, parts)
		if err != nil {
			return fmt.Errorf("bot store: %w", err)
		}
		wiring.Provide(s, wiring.BotStore, apps)
	}
	if runs(registry.RoleGuild, registry.RoleGateway) {
		rev, err := apirole.OpenRevocations(ctx, parts)
		if err != nil {
			return fmt.Errorf("revocations: %w", err)
		}
		wiring.Provide[wiring.RevocationPath](s, wiring.Revocations, rev)
	}
	// Bots' identify counters: the process's, when every gateway counting
	// a bot counts on them (one process, or shared through --redis).
	if n.inProc || cfg.Redis != "mem" {
		wiring.Provide(s, wiring.BotCounters, n.basics.Counters)
	}

	// Voice: the guild places calls on the in-process fleet the voice
	// role adds its SFU to, or on the SFUs whose load reports the
	// registry holds.
	if runs(registry.RoleGuild) {
		key, err := voicerole.SigningKey(cfg, n.inProc)
		if err != nil {
			return err
		}
		v := wiring.VoicePort{Key: key}
		if n.inProc {
			n.voiceFleet = fleet.NewLocal()
			v.Allocator, v.Endpoints = n.voiceFleet, n.voiceFleet.Endpoints
			wiring.Provide(s, wiring.VoiceFleet, n.voiceFleet)
		} else {
			f := fleet.NewRegistry(n.reg, fleet.RegistryConfig{Logger: n.log.With("component", "voice-fleet")})
			v.Allocator, v.Endpoints, v.Run = f, f.Endpoints, f.Run
		}
		wiring.Provide(s, wiring.Voice, v)
	}
	if runs(voicerole.Name) {
		keys, err := voicerole.TrustedKeys(cfg, n.inProc)
		if err != nil {
			return err
		}
		wiring.Provide(s, wiring.VoiceKeys, keys)
		if !n.inProc {
			wiring.Provide[voice.LoadReporter](s, wiring.VoiceLoad, fleet.Reporter{Registry: n.reg})
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
		if _, err := wiring.Shared(s, liverole.BackendsPort, func() (liverole.Backends, func() error, error) { return b, closeLive, nil }); err != nil {
			return err
		}
	}
	return nil
}

// lateSink delivers to the process's gateway node once the gateway role
// set it; before then no session exists, so there is nothing to deliver.
type lateSink struct{ node *wiring.Late[*gateway.Node] }

// Deliver implements event.Sink.
func (s lateSink) Deliver(ctx context.Context, node string, b event.Batch) {
	if n, ok := s.node.Get(); ok {
		n.Deliver(ctx, node, b)
	}
}
