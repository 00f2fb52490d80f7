// Package presencerole is the presence role, built by the same Build in
// `concord dev` and in `concord serve`: every live session of every user,
// as the gateways report them, folded into one status per user
// (runtime/domain/presence), coalesced, and broadcast to the user's friends'
// sessions and to the guilds, whose actors fan it out like any guild
// event. Its gateway side (Gateway: the gateway's SessionReporter and its
// op 3, 8 and 14 handlers) is one type for both commands, given to the
// process's gateway under GatewayKey.
//
// The ports (runtime/services/wiring), as the process gives them ("`concord dev`"
// below is a process without wiring.Placement, every guild in it):
//   - the presence service: in `concord dev` one in process (Local,
//     under LocalKey), broadcasting through the process's guild service;
//     in `concord serve` the user's owner on the ring over the live
//     presence nodes (two or more replicas), reached over PresenceNode —
//     in process when this node owns the user.
//   - the guilds op 8 and op 14 go to (Guilds): the process's guild
//     service (LocalGuilds) or the guild's owner over GuildNode
//     (OwnerGuilds on wiring.GuildClient).
//   - where a change goes: in `concord dev` the guild service
//     (guild.Service.PresenceChanged, which reaches friends too); in
//     `concord serve` friends' sessions on their gateway nodes (found
//     through the session directory) and one GuildNode.PresenceChanged
//     per guild node owning one of the user's guilds.
//
// Guild nodes of `concord serve` with --presence keep the presences the
// presence nodes broadcast to them in a cache the guild role owns
// (runtime/services/guildrole): the guild role is built before this one and serves
// GuildNode itself.
package presencerole

import (
	"context"
	"errors"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = "presence"

// Role is the presence role.
//
// In `concord serve` its Build runs on every node that takes part in
// presence (Joins), not only on the nodes running --roles=presence: a
// gateway node with --presence needs the gateway side (the ring-sharded
// PresenceNode client under GatewayKey) and nothing else of the role, and
// building that here keeps the role's two halves — the service and the
// client that reaches it — in one Build that decides, from the node's
// roles, which halves apply. The node registers under its own roles only,
// so a gateway node building the gateway side never joins the presence
// ring. The process's want function asks Joins for this role's name.
var Role = wiring.Role{Name: Name, Build: build,
	Uses:  []string{wiring.GuildService.Name, wiring.Placement.Name, wiring.GuildClient.Name, wiring.Gateways.Name, wiring.Sessions.Name},
	Gives: []string{wiring.PresenceGateway.Name, wiring.Relationships.Name},
}

// LocalKey is the seam of `concord dev`'s in-process presence service
// (Local): provided by the role in `concord dev`, for tests that read or
// restart the service.
var LocalKey = wiring.Key[*Local]{Name: "presence/local"}

// Joins reports whether a `concord serve` node configured by cfg builds
// the presence role: it runs --roles=presence, or the gateway role with
// presence on (--presence). `concord dev` builds every role.
func Joins(cfg config.Config) bool {
	return slices.Contains(cfg.Roles, Name) || gatewaySide(cfg)
}

// gatewaySide reports whether a `concord serve` node's gateway has
// presence.
func gatewaySide(cfg config.Config) bool {
	return slices.Contains(cfg.Roles, registry.RoleGateway) && cfg.Presence.Enabled
}

// build builds the halves of the role the process runs: in `concord dev`
// the service in process and the gateway side on it; in `concord serve`
// the service for the users the node owns (--roles=presence) and the
// gateway side on the presence ring (gateway nodes with --presence).
func build(ctx context.Context, b *wiring.Builder) error {
	if _, placed := wiring.Lookup(b.Seams, wiring.Placement); !placed {
		// Every guild is in this process: one presence service here,
		// broadcasting through the guild service.
		svc, ok := wiring.Lookup(b.Seams, wiring.GuildService)
		if !ok {
			return errors.New("no guild service in the process to broadcast presence through")
		}
		local, err := newLocal(b.Config, svc, b.Metrics, b.Logger.With("component", "presence"))
		if err != nil {
			return err
		}
		wiring.Provide(b.Seams, LocalKey, local)
		// The relationships this service holds, for the live gateway's
		// friends boost. In a cluster each presence node holds only its
		// users' (in memory), and no port reaches them from elsewhere.
		wiring.Provide[presence.Relationships](b.Seams, wiring.Relationships, local.friends)
		wiring.Provide(b.Seams, GatewayKey, GatewaySide{Presence: local.gateway, ReportInterval: b.Config.Presence.ReportInterval})
		if tick := tickInterval(b.Config.Presence); tick > 0 {
			// Each tick asks for the current service: Restart swaps it.
			return b.Add(lifecycle.Part{Name: "tick", Run: func(ctx context.Context) error {
				lifecycle.Every(ctx, tick, func(ctx context.Context) { local.Service().Tick(ctx) })
				return nil
			}})
		}
		return nil
	}
	var owned *ownedPresence
	if slices.Contains(b.Config.Roles, Name) {
		var err error
		if owned, err = buildService(ctx, b); err != nil {
			return err
		}
	}
	if gatewaySide(b.Config) {
		return buildGatewaySide(ctx, b, owned)
	}
	return nil
}
