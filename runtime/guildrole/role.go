// Package guildrole is the guild role, built by the same Build in
// `concord dev` and in `concord serve --roles=guild`: the guild actors
// (runtime/guild) of the guilds this process runs — every guild in
// `concord dev`, the guilds the placement ring gives the node in a
// cluster — with voice channels allocated from the process's voice fleet.
//
// The seams, by mode:
//   - the guild service (Service): provided by the role wherever it runs;
//     the REST API, the bot platform and, in `concord dev`, the gateway
//     and presence call it in process. Read states check visibility with
//     it in `concord dev` (readstaterole.LocalGuilds).
//   - where its events go (LocalSink): in `concord dev` the process's
//     gateway, provided by the process before the role is built; in
//     `concord serve` the gateway nodes over GatewayNode.Deliver, big
//     guilds through their relay tier (relay.go), and events aimed at one
//     user through the session directory on every gateway node.
//   - the guilds of other nodes (Client): in `concord serve` one
//     GuildNode client per process over the placement ring, for the
//     roles that reach guilds they do not run (the gateway's
//     subscriptions, op 4, 8 and 14).
//   - voice (VoiceEndpoints): the endpoints of the fleet the guild
//     allocates calls from, which the web client's policy admits: the
//     in-process fleet of `concord dev` (role.Parts.VoiceFleet), the SFUs
//     of the registry in `concord serve`.
//
// Every process running the role serves the per-guild statistics of its
// actors among its admin endpoints (adminstats.go).
//
// In `concord serve` the role also serves GuildNode (backend.go) for the
// guilds the node owns and unloads the actors of guilds the ring moves
// away (sweep.go).
package guildrole

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
	"github.com/concord-chat/concord/runtime/voice/fleet"
	"github.com/concord-chat/concord/runtime/voicerole"
)

// Name is the role's --roles name.
const Name = registry.RoleGuild

// Role is the guild role.
var Role = role.Role{Name: Name, Build: build}

// Seams this role consumes and provides.
var (
	// Service is the process's guild service, provided when the role runs
	// in the process.
	Service = role.Key[*guild.Service]{Name: "guild/service"}
	// LocalSink is where the guild service delivers its events in
	// `concord dev`: the process's gateway, provided by the process.
	LocalSink = role.Key[event.Sink]{Name: "gateway/sink"}
	// VoiceEndpoints lists the voice endpoints of the fleet the guild
	// allocates calls from, provided when the role runs in the process.
	VoiceEndpoints = role.Key[func() []string]{Name: "voice/endpoints"}
	// clientKey is the process's GuildNode client (Client).
	clientKey = role.Key[transport.GuildClient]{Name: "guild/client"}
)

// Errors is the guild part of the transport's error table, shared by
// guild servers and their clients.
var Errors = []transport.ErrorCode{
	{Err: guild.ErrMissingAccess, Code: codes.PermissionDenied},
	{Err: guild.ErrUnknownGuild, Code: codes.NotFound},
	{Err: guild.ErrNotSubscribed, Code: codes.NotFound},
}

// Client returns the process's GuildNode client over the placement ring
// (`concord serve`), opened once per process and closed with its seams.
func Client(ctx context.Context, p role.Parts) (transport.GuildClient, error) {
	return role.Shared(p.Seams, clientKey, func() (transport.GuildClient, func() error, error) {
		ring, err := role.Ring(ctx, p.Seams, p.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: p.Logger.With("component", "ring")})
		if err != nil {
			return nil, nil, err
		}
		c := transport.NewGuildClient(p.ClientConfig, ring)
		return c, c.Close, nil
	})
}

// build opens the guild service with its sink, voice and (in a cluster)
// relays and session directory, and provides it.
func build(ctx context.Context, b *role.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "guild")
	// The service and its clients close with the process's seams, after
	// the parts and roles that call them.
	var closers role.Closers
	defer func() {
		if err != nil {
			_ = closers.Close()
		}
	}()
	deps := guild.Deps{Store: b.Store, IDs: b.IDs, Auth: b.Auth, Messages: messageWriter(b.Seams, b.Store, log)}
	var ring *registry.LocalRing
	var relays *relayRouter
	if b.Dev() {
		sink, ok := role.Lookup(b.Seams, LocalSink)
		if !ok {
			return errors.New("no gateway sink in the process to deliver guild events to")
		}
		deps.Sink = sink
	} else {
		if ring, err = role.Ring(ctx, b.Seams, b.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")}); err != nil {
			return err
		}
		gwRing, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGateway, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
		if err != nil {
			return err
		}
		sink := transport.NewGatewayClient(b.ClientConfig, gwRing)
		closers.Add(sink.Close)
		relayClient := transport.NewRelayClient(b.ClientConfig)
		closers.Add(relayClient.Close)
		if relays, err = newRelayRouter(relayClient, b.Metrics, log.With("component", "relays")); err != nil {
			return fmt.Errorf("relays: %w", err)
		}
		sessions := transport.NewSessionDirectory(b.ClientConfig, role.RingRoster{LocalRing: gwRing})
		closers.Add(sessions.Close)
		deps.Sink, deps.Relays, deps.Sessions = sink, relays, sessions
	}
	gcfg := guild.Config{Logger: log, Registerer: b.Metrics, ShadowEvery: cfg.PermissionsShadowEvery}
	var owns func(snowflake.ID) bool
	if ring != nil {
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
	if b.Dev() {
		// Read states check visibility and expand role mentions with the
		// process's guild service.
		role.Provide[readstaterole.Guilds](b.Seams, readstaterole.LocalGuilds, svc)
	} else {
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
	if _, ok := role.Lookup(b.Seams, Service); ok {
		return errors.New("the process has a guild service already")
	}
	localStats{svc: svc, node: cfg.Node}.routes(b.HandleAdmin)
	_, err = role.Shared(b.Seams, Service, func() (*guild.Service, func() error, error) { return svc, closers.Close, nil })
	return err
}

// enableVoice turns voice channels on in the guild service: calls are
// placed on the process's in-process fleet in `concord dev` (the voice
// role adds its SFU to it), on the SFUs whose load reports the registry
// holds in `concord serve`; tokens are signed with the voice key.
func enableVoice(b *role.Builder, svc *guild.Service) error {
	key, err := voicerole.SigningKey(b.Config, b.Dev())
	if err != nil {
		return err
	}
	var alloc guild.VoiceAllocator
	if b.Dev() {
		if b.VoiceFleet == nil {
			return errors.New("no voice fleet in the process")
		}
		alloc = b.VoiceFleet
		role.Provide(b.Seams, VoiceEndpoints, b.VoiceFleet.Endpoints)
	} else {
		f := fleet.NewRegistry(b.Registry, fleet.RegistryConfig{Logger: b.Logger.With("component", "voice-fleet")})
		if err := b.Add(lifecycle.Part{Name: "voice-fleet", Run: f.Run}); err != nil {
			return err
		}
		alloc = f
		role.Provide(b.Seams, VoiceEndpoints, f.Endpoints)
	}
	// The node's --voice-region is the fallback region of calls whose
	// channel is automatic and whose first joiner's gateway node runs no
	// SFU (runtime/guild/voiceregion.go).
	return svc.EnableVoice(guild.VoiceConfig{Allocator: alloc, Key: key, Region: b.Config.Voice.Region})
}
