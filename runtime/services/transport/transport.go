// Package transport carries Concord's calls between nodes over gRPC.
//
// The services are defined in proto/concord/transport/v1 and generated
// into transportpb by hack/proto.sh:
//
//   - GatewayNode.Deliver: guild nodes stream event batches to the gateway
//     node holding the target sessions. NewGatewayClient returns an
//     event.Sink that routes each batch by node name to a pooled
//     connection found in the registry, over one ordered stream per node.
//   - GatewayNode.UserSessions/SubscribeGuild: the session directory.
//     NewSessionDirectory asks every live gateway node for a user's
//     sessions (DMs, MESSAGE_ACK) and subscribes a session to a guild
//     joined mid-session through its gateway node.
//   - GuildNode: gateway, presence and read-state nodes reach the guild
//     node owning a guild on the placement ring, one typed RPC per
//     operation: Subscribe and Disconnect (a session's guilds),
//     MoveSession (a draining gateway's handoff), CanView and RoleMembers
//     (mention counting), PresenceChanged, LazyRequest and RequestMembers
//     (presence and member lists), UpdateVoiceState (op 4).
//     NewGuildClient returns a GuildBackend that routes by guild id and
//     retries once on the ring's new owner when the old one is
//     unavailable. REST requests do not travel here: API nodes forward
//     them to the owner over HTTP.
//   - DataNode: the message port of data nodes (NewDataClient).
//   - ReadStateNode.Ack/States/AddMentions: read-state nodes
//     (--roles=readstate) serve read markers and mention counts of the
//     users they own; NewReadStateClient routes by user id over the ring
//     of read-state nodes, and mention consumers hand mentions to the
//     users' owners with AddMentions.
//   - PresenceNode: gateway nodes report their sessions and op 3 to the
//     presence node owning each user, which folds them into one status
//     per user. NewPresenceClient calls one node (the owner of id 0 on
//     the ring it is given); runtime/services/presencerole builds one per replica
//     and routes each user to the owner on the presence ring.
//   - RelayNode: guild nodes of a guild with a relay tier send its
//     batches once per relay node, which fans them out to the gateway
//     nodes (NewRelayClient).
//
// NewServer builds the gRPC server of a node with logging and metrics
// interceptors, message-size limits and the standard health service, and
// registers the services the node runs.
package transport

import (
	"context"
	"encoding/json"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
)

// DefaultMaxMsgSize bounds messages in both directions unless configured.
const DefaultMaxMsgSize = 16 << 20

// GuildBackend is what a guild node offers gateway and API nodes. The
// guild tier implements it in-process; NewGuildClient implements it over
// gRPC, so callers do not care where the guild lives.
type GuildBackend interface {
	// Subscribe attaches session s to guild guildID: the guild sends it
	// GUILD_CREATE and then the guild's events, through the event.Sink.
	Subscribe(ctx context.Context, guildID snowflake.ID, s event.Session) error
	// SubscribeMoved is Subscribe for a session that was subscribed on an
	// earlier owner of guildID, which the ring moved: the guild first
	// delivers the events it dispatched since it loaded that the session
	// would have received, and sends GUILD_CREATE only when those cannot
	// bring the session's view of the guild up to date or refresh asks
	// for it (the previous owner left the cluster)
	// (guild.Service.AttachMovedSession).
	SubscribeMoved(ctx context.Context, guildID snowflake.ID, s event.Session, refresh bool) error
	// Disconnect detaches session s, which ended for good, from guildID.
	Disconnect(ctx context.Context, guildID snowflake.ID, s event.Session) error
	// MoveSession moves session mv.Session's subscription to guildID to
	// the gateway node mv.To (a draining gateway's handoff) and returns
	// how many move markers the guild sent the old node. A session the
	// guild does not deliver to is guild.ErrNotSubscribed.
	MoveSession(ctx context.Context, guildID snowflake.ID, mv guild.Move) (markers int, err error)
	// CanView reports whether user may see channel of guildID.
	CanView(ctx context.Context, guildID, user, channel snowflake.ID) (bool, error)
	// RoleMembers lists the members of guildID holding role; an unknown
	// guild is guild.ErrUnknownGuild.
	RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error)
	// PresenceChanged hands user's new presence to the node owning
	// guildID, which applies it to every guild of the user it has loaded.
	// A node without presence answers ErrNotServed.
	PresenceChanged(ctx context.Context, guildID, user snowflake.ID, p presence.Presence) error
	// LazyRequest carries session s's op 14 payload d to guildID's owner.
	LazyRequest(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error
	// RequestMembers carries session s's op 8 payload d to guildID's
	// owner.
	RequestMembers(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error
	// UpdateVoiceState carries session s's op 4 to the guild's owner; a
	// join the guild refuses is answered through the guild's events, not
	// as an error.
	UpdateVoiceState(ctx context.Context, s event.Session, req guild.VoiceStateRequest) error
}

// Directory finds live nodes by name; *registry.LocalRing implements it.
type Directory interface {
	Node(name string) (registry.Node, bool)
}

// Placement finds the node owning a guild; *registry.LocalRing
// implements it.
type Placement interface {
	Owner(id snowflake.ID) (registry.Node, bool)
}

var (
	_ Directory = (*registry.LocalRing)(nil)
	_ Placement = (*registry.LocalRing)(nil)
)

// OwnedBy returns a Services.Owns function: whether node owns a guild in
// p (the guild node's own LocalRing over the guild role).
func OwnedBy(p Placement, node string) func(snowflake.ID) bool {
	return func(id snowflake.ID) bool {
		n, ok := p.Owner(id)
		return ok && n.Name == node
	}
}
