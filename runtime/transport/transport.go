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
//   - GuildNode.Subscribe/Disconnect/Call: gateway and API nodes reach the
//     guild node owning a guild on the placement ring. NewGuildClient
//     returns a GuildBackend that routes by guild id and retries once on
//     the ring's new owner when the old one is unavailable.
//   - DataNode: the message port of data nodes (NewDataClient).
//   - ReadStateNode.Ack/States/AddMentions: read-state nodes
//     (--roles=readstate) serve read markers and mention counts of the
//     users they own; NewReadStateClient routes by user id over the ring
//     of read-state nodes, and mention consumers hand mentions to the
//     users' owners with AddMentions.
//   - PresenceNode: gateway nodes report their sessions and op 3 to the
//     presence node owning each user, which folds them into one status
//     per user (NewPresenceClient calls one node; the cluster picks it).
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

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
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
	// Disconnect detaches session s, which ended for good, from guildID.
	Disconnect(ctx context.Context, guildID snowflake.ID, s event.Session) error
	// Call is an escape hatch for forwarding one operation on a guild
	// (such as a REST request the API node received) to the guild's
	// owner. method names the operation and body carries its arguments;
	// the result is an HTTP status code and body. A non-nil error means
	// the operation could not be carried out at all (no owner, node
	// unavailable), not that it was refused.
	Call(ctx context.Context, guildID snowflake.ID, method string, body []byte) (status int, resp []byte, err error)
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
