package gateway

import (
	"context"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// Backend is what a gateway node needs from the rest of Concord.
type Backend interface {
	// Identify checks the token (an optional "Bot " prefix already stripped) and the intents,
	// and returns the READY parts. Errors (checked with errors.Is): ErrAuthenticationFailed → close 4004,
	// ErrDisallowedIntents → 4014, ErrInvalidIntents → 4013, ErrInvalidShard → 4010, ErrShardingRequired → 4011;
	// anything else → 4000. The session passed has ID, Intents, ShardID/ShardCount, Node set; UserID is unknown yet.
	Identify(ctx context.Context, token string, s event.Session) (event.Ready, error)
	// Subscribe attaches an identified session (UserID and Bot now set) to its guilds and private channels.
	// The guild tier then sends one GUILD_CREATE per guild to the session through the node's
	// event.Sink (Deliver), ordered with every later event of that guild. It may return before the
	// GUILD_CREATEs are delivered.
	Subscribe(ctx context.Context, s event.Session) error
	// Disconnect detaches a session that ended for good (closed with 1000/1001, invalidated, or its
	// resume window ran out). A dropped but resumable session stays subscribed and buffers.
	Disconnect(ctx context.Context, s event.Session)
}
