// Package guildrole is the guild role, built by the same Build in
// `concord dev` and in `concord serve --roles=guild`: the guild actors
// (runtime/domain/guild) of the guilds this process runs — every guild in
// `concord dev`, the guilds the placement ring gives the node in a
// cluster — with voice channels allocated from the process's voice fleet.
//
// The ports (runtime/services/wiring), which the process decides and the role
// consumes without asking which command it runs in:
//   - it gives the guild service (wiring.GuildService), which the REST API,
//     the bot platform and, where they run in the same process, the
//     gateway, presence and read states call.
//   - its events go to wiring.Sink (the process's gateway, or the gateway
//     nodes), events aimed at one user through wiring.Sessions when the
//     process has a session directory.
//   - with wiring.Placement (the guilds are placed on a ring over the live
//     guild nodes) it runs only the guilds the ring gives the node: it
//     serves GuildNode (backend.go) for them, unloads the actors of
//     guilds the ring moves away (sweep.go) and sends big guilds' events
//     through their relay tier (relay.go).
//   - voice channels are placed with wiring.Voice: the in-process fleet, or
//     the SFUs of the registry.
//
// Every process running the role serves the per-guild statistics of its
// actors among its admin endpoints (adminstats.go).
package guildrole

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = registry.RoleGuild

// Role is the guild role.
var Role = wiring.Role{Name: Name, Build: build,
	Needs: []string{wiring.Sink.Name, wiring.Voice.Name},
	Uses:  []string{wiring.Placement.Name, wiring.Sessions.Name, wiring.Outbox.Name},
	Gives: []string{wiring.GuildService.Name},
}

// Errors is the guild part of the transport's error table, shared by
// guild servers and their clients.
var Errors = []transport.ErrorCode{
	{Err: guild.ErrMissingAccess, Code: codes.PermissionDenied},
	{Err: guild.ErrUnknownGuild, Code: codes.NotFound},
	{Err: guild.ErrNotSubscribed, Code: codes.NotFound},
}

// build opens the guild service with its sink, voice and (in a cluster)
// relays and session directory, and provides it.
func build(ctx context.Context, b *wiring.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "guild")
	// The service and its clients close with the process's seams, after
	// the parts and roles that call them.
	var closers wiring.Closers
	defer func() {
		if err != nil {
			_ = closers.Close()
		}
	}()
	deps := guild.Deps{Store: b.Store, IDs: b.IDs, Auth: b.Auth, Messages: messageWriter(b.Seams, b.Store, log)}
	var ok bool
	if deps.Sink, ok = wiring.Lookup(b.Seams, wiring.Sink); !ok {
		return errors.New("no sink in the process to deliver guild events to")
	}
	if sessions, ok := wiring.Lookup(b.Seams, wiring.Sessions); ok {
		deps.Sessions = sessions
	}
	ring, placed := wiring.Lookup(b.Seams, wiring.Placement)
	var relays *relayRouter
	if !placed && cfg.DevRelays > 0 {
		// Relays in process: big guilds hand them their sessions.
		local := fanout.NewLocal(deps.Sink, cfg.DevRelays, 4096)
		closers.Add(func() error { local.Close(); return nil })
		deps.Slices = local
	}
	if placed {
		relayClient := transport.NewRelayClient(b.ClientConfig)
		closers.Add(relayClient.Close)
		if relays, err = newRelayRouter(relayClient, b.Metrics, log.With("component", "relays")); err != nil {
			return fmt.Errorf("relays: %w", err)
		}
		deps.Relays = relays
		// Guilds above --relay-threshold hand their sessions to the
		// relays of their list, which filter them (runtime/domain/fanout).
		sliceClient := transport.NewSliceClient(b.ClientConfig)
		closers.Add(sliceClient.Close)
		deps.Slices = sliceRouter{lists: relays, client: sliceClient}
	}
	gcfg := guild.Config{Logger: log, Registerer: b.Metrics, ShadowEvery: cfg.PermissionsShadowEvery,
		SliceThreshold: cfg.RelayThreshold, SliceSize: cfg.RelayThreshold}
	var owns func(snowflake.ID) bool
	if placed {
		owns = transport.OwnedBy(ring, cfg.Node)
		gcfg.Owns = owns
	}
	svc, err := guild.NewService(gcfg, deps)
	if err != nil {
		return fmt.Errorf("guild service: %w", err)
	}
	closers.Add(svc.Close)
	if err := registerTopGuilds(b.Metrics, svc, cfg.GuildMetricsTop); err != nil {
		return err
	}
	if err := enableVoice(b, svc); err != nil {
		return err
	}
	if placed {
		backend := guildBackend{svc: svc}
		if cfg.Presence.Enabled {
			if backend.presences, err = enableGuildPresence(svc, b.Metrics); err != nil {
				return err
			}
		}
		if b.GRPC != nil {
			b.GRPC.Guild, b.GRPC.Owns = backend, owns
		}
		sw, err := newSweeper(svc, ring, owns, b.Metrics, log)
		if err != nil {
			return err
		}
		if err := b.Add(lifecycle.Part{Name: "sweep", Run: func(ctx context.Context) error { sw.run(ctx, cfg.RetryInterval); return nil }}); err != nil {
			return err
		}
		if err := b.Add(lifecycle.Part{Name: "relays", Run: func(ctx context.Context) error {
			relays.follow(ctx, b.Registry, cfg.RetryInterval)
			return nil
		}}); err != nil {
			return err
		}
	}
	if _, ok := wiring.Lookup(b.Seams, wiring.GuildService); ok {
		return errors.New("the process has a guild service already")
	}
	localStats{svc: svc, node: cfg.Node}.routes(b.HandleAdmin)
	_, err = wiring.Shared(b.Seams, wiring.GuildService, func() (*guild.Service, func() error, error) { return svc, closers.Close, nil })
	return err
}

// enableVoice turns voice channels on in the guild service with the
// process's voice port: calls are placed on its allocator (the
// in-process fleet the voice role adds its SFU to, or the SFUs whose
// load reports the registry holds), tokens signed with its key.
func enableVoice(b *wiring.Builder, svc *guild.Service) error {
	v, ok := wiring.Lookup(b.Seams, wiring.Voice)
	if !ok {
		return errors.New("no voice port in the process to place calls with")
	}
	if v.Run != nil {
		if err := b.Add(lifecycle.Part{Name: "voice-fleet", Run: v.Run}); err != nil {
			return err
		}
	}
	// The node's --voice-region is the fallback region of calls whose
	// channel is automatic and whose first joiner's gateway node runs no
	// SFU (runtime/domain/guild/voiceregion.go).
	return svc.Voice.Enable(guild.VoiceConfig{Allocator: v.Allocator, Key: v.Key, Region: b.Config.Voice.Region})
}
