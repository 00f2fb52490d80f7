package store

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ReactionCount is one emoji's reactions to a message.
type ReactionCount struct {
	// Emoji is the reaction key: a unicode emoji, or "name:id" for a
	// custom emoji.
	Emoji string
	Count int
	// Me reports whether the viewer the counts were read for reacted.
	Me bool
}

// Reactions stores users' reactions to messages, keyed by (channel,
// message, emoji, user). Every write is durable on return.
type Reactions interface {
	// AddReaction records a reaction; it reports false when the user had
	// already reacted with that emoji.
	AddReaction(ctx context.Context, channelID, messageID snowflake.ID, emoji string, userID snowflake.ID) (bool, error)
	// RemoveReaction removes one reaction; false when there was none.
	RemoveReaction(ctx context.Context, channelID, messageID snowflake.ID, emoji string, userID snowflake.ID) (bool, error)
	// RemoveReactions removes every reaction with emoji to a message, or
	// every reaction when emoji is "".
	RemoveReactions(ctx context.Context, channelID, messageID snowflake.ID, emoji string) error
	// ReactionUsers lists up to limit users who reacted with emoji, by
	// user id ascending, each above after.
	ReactionUsers(ctx context.Context, channelID, messageID snowflake.ID, emoji string, after snowflake.ID, limit int) ([]snowflake.ID, error)
	// CountReactions returns, for each of the messages that has
	// reactions, its emojis in the order they were first added, with
	// whether viewer reacted.
	CountReactions(ctx context.Context, channelID snowflake.ID, messageIDs []snowflake.ID, viewer snowflake.ID) (map[snowflake.ID][]ReactionCount, error)
}

// Pin is a pinned message of a channel.
type Pin struct {
	MessageID snowflake.ID
	PinnedAt  time.Time
}

// Pins stores the pinned messages of channels (Discord caps them at 50
// per channel, so a channel's pins are read whole).
type Pins interface {
	// PinMessage pins a message at a time; false when it already was.
	PinMessage(ctx context.Context, channelID, messageID snowflake.ID, at time.Time) (bool, error)
	// UnpinMessage unpins a message; false when it was not pinned.
	UnpinMessage(ctx context.Context, channelID, messageID snowflake.ID) (bool, error)
	// ListPins returns a channel's pins, most recently pinned first.
	ListPins(ctx context.Context, channelID snowflake.ID) ([]Pin, error)
}

// Ban bars a user from a guild.
type Ban struct {
	GuildID   snowflake.ID
	UserID    snowflake.ID
	Reason    string
	CreatedAt time.Time
}

// Bans stores guild bans. Writes are durable on return.
type Bans interface {
	PutBan(ctx context.Context, b Ban) error
	// GetBan returns a ban or ErrNotFound.
	GetBan(ctx context.Context, guildID, userID snowflake.ID) (Ban, error)
	// DeleteBan lifts a ban; ErrNotFound when there is none.
	DeleteBan(ctx context.Context, guildID, userID snowflake.ID) error
	// ListBans lists up to limit bans by user id ascending, each above
	// after and (when before is not zero) below before; with before set
	// they are the bans closest below it.
	ListBans(ctx context.Context, guildID, before, after snowflake.ID, limit int) ([]Ban, error)
}

// AuditEntry is one entry of a guild's audit log.
type AuditEntry struct {
	// ID is a snowflake minted when the action happened.
	ID         snowflake.ID
	GuildID    snowflake.ID
	UserID     snowflake.ID // who acted
	TargetID   snowflake.ID // what was acted on (0: none)
	ActionType int
	Reason     string
	// Changes and Options are JSON (Discord's changes array and options
	// object); empty means none.
	Changes string
	Options string
}

// AuditQuery selects audit log entries: newest first, filtered by user and
// action type when set, ids below Before or above After (Before wins).
type AuditQuery struct {
	UserID     snowflake.ID
	ActionType int
	Before     snowflake.ID
	After      snowflake.ID
	// Limit is 1..100.
	Limit int
}

// AuditRetention is how long audit log entries are kept (Discord: 45 days).
const AuditRetention = 45 * 24 * time.Hour

// AuditLog stores guild audit logs; entries older than AuditRetention are
// dropped.
type AuditLog interface {
	AppendAudit(ctx context.Context, e AuditEntry) error
	ListAudit(ctx context.Context, guildID snowflake.ID, q AuditQuery) ([]AuditEntry, error)
}

// Moderation is the storage of reactions, pins, bans and audit logs.
type Moderation interface {
	Reactions
	Pins
	Bans
	AuditLog
}
