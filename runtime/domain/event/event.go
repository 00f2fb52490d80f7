// Package event defines what travels from the guild tier to gateway nodes:
// sessions as the guild tier sees them, and batches of pre-serialised
// dispatches addressed to sessions on one gateway node.
//
// A guild actor serialises each payload variant once (for example the
// message with content and without, for the MESSAGE_CONTENT intent) and
// sends one Batch per gateway node; the node stamps each target session's
// next sequence number, buffers the frame for resume and writes it.
package event

import (
	"context"
	"encoding/json"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// SessionID identifies a gateway session; it is also Discord's session_id.
type SessionID string

// Session describes one gateway session to the guild tier.
type Session struct {
	ID      SessionID
	UserID  snowflake.ID
	Bot     bool
	Intents uint64
	// ShardID and ShardCount are the session's shard; ShardCount 0 or 1
	// means unsharded.
	ShardID    int
	ShardCount int
	// Node names the gateway node holding the session.
	Node string
	// LargeThreshold is the large_threshold the session sent in IDENTIFY
	// (50–250; 0 means the default, 50). A user session is passive in a
	// guild with more members (docs/api.md, "Passive sessions").
	LargeThreshold int
}

// Target is one recipient of a Batch and the payload variant it gets.
type Target struct {
	Session SessionID
	Variant int
}

// Batch is one dispatch (op 0) for many sessions on one gateway node.
type Batch struct {
	// Type is the dispatch name, e.g. "MESSAGE_CREATE".
	Type string
	// Payloads are the serialised `d` variants, each encoded once.
	Payloads []json.RawMessage
	Targets  []Target
}

// MoveMarker is the dispatch name of the marker batches a source of a
// session's events (a guild's actor, the private-channel router) sends
// the session's old gateway node once it sends the session's events to
// another node: its payload is the move's id as a JSON string, and it
// follows every event the source sent the old node. The gateway counts
// markers to know when the old node has all it will get; they never
// reach a client. It lives here, beside Batch, because both sides of the
// move name it: the guild tier sends it, the gateway consumes it.
const MoveMarker = "CONCORD_SESSION_MOVED"

// Sink accepts batches for the sessions of one or more gateway nodes.
// Deliver must not block on a slow session: each session's buffer is
// bounded and a session that overflows it is closed resumably.
type Sink interface {
	Deliver(ctx context.Context, node string, b Batch)
}

// Ready is what the rest of Concord tells a gateway about a session that
// identified: enough to write READY. The JSON parts are serialised in
// Discord's shapes by the guild tier.
type Ready struct {
	UserID snowflake.ID
	Bot    bool
	// User is READY's `user` object.
	User json.RawMessage
	// Guilds are the user's guilds, sent in READY as unavailable and then
	// one GUILD_CREATE each.
	Guilds []snowflake.ID
	// PrivateChannels is READY's `private_channels` array.
	PrivateChannels json.RawMessage
	// ApplicationID is set for bots (READY's `application.id`).
	ApplicationID snowflake.ID
	// ApplicationFlags is READY's `application.flags`.
	ApplicationFlags int
	// ReadState is READY's `read_state` object (entries of last read
	// message id and mention count per channel); nil leaves it out.
	ReadState json.RawMessage
}
