// Package store defines the storage ports of Concord — messages, guild
// state and accounts — with their value types. Adapters live in
// subpackages (store/pebble embedded, store/cassandra in production) and
// all pass the suite in store/storetest.
//
// Both adapters also implement TransactionalOutbox (outbox.go): a message
// write can commit records for the event log in the same atomic write,
// and a relay drains them, so no crash can keep a stored message's event
// from the log.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Errors every adapter returns (wrapped) so callers can branch with errors.Is.
var (
	ErrNotFound    = errors.New("store: not found")
	ErrExists      = errors.New("store: already exists")
	ErrUnavailable = errors.New("store: unavailable")
)

// DefaultBucketWidth is the default width of a channel's message bucket.
const DefaultBucketWidth = 10 * 24 * time.Hour

// Bucket returns the bucket of a message id for a bucket width: the
// snowflake's milliseconds since the epoch divided by the width.
func Bucket(id snowflake.ID, width time.Duration) int64 {
	return int64(uint64(id)>>22) / width.Milliseconds()
}

// HistoryQuery selects a page of a channel's history. At most one of
// Before, After and Around is set; all cursors are exclusive except Around,
// which includes the message itself when it exists.
type HistoryQuery struct {
	Before snowflake.ID
	After  snowflake.ID
	Around snowflake.ID
	// Limit is 1..100; adapters treat 0 as 50.
	Limit int
}

// Messages stores channel history, partitioned by (channel_id, bucket) and
// clustered by message id descending.
//
// Contract: PutMessage is durable when it returns nil (an acknowledged
// write survives a crash of the process). Writing an existing id
// overwrites the row (edits). ListMessages returns newest first for every
// query shape — for After, the messages right after the cursor, newest
// first, as Discord does — and walks only non-empty buckets.
type Messages interface {
	PutMessage(ctx context.Context, m Message) error
	GetMessage(ctx context.Context, channelID, messageID snowflake.ID) (Message, error)
	DeleteMessage(ctx context.Context, channelID, messageID snowflake.ID) error
	// DeleteMessages removes many messages of one channel at once; ids that
	// do not exist are ignored.
	DeleteMessages(ctx context.Context, channelID snowflake.ID, ids []snowflake.ID) error
	ListMessages(ctx context.Context, channelID snowflake.ID, q HistoryQuery) ([]Message, error)
	// Buckets lists a channel's non-empty buckets, newest first.
	Buckets(ctx context.Context, channelID snowflake.ID) ([]int64, error)
}

// Guilds stores guild state: guilds, channels (also private ones), roles,
// members and invites. Every Put is an upsert and durable on return.
type Guilds interface {
	PutGuild(ctx context.Context, g Guild) error
	// DeleteGuild removes the guild with its channels, roles, members and
	// invites.
	DeleteGuild(ctx context.Context, guildID snowflake.ID) error
	// LoadGuild returns the guild with its channels, roles and members.
	LoadGuild(ctx context.Context, guildID snowflake.ID) (GuildState, error)

	PutChannel(ctx context.Context, c Channel) error
	GetChannel(ctx context.Context, channelID snowflake.ID) (Channel, error)
	DeleteChannel(ctx context.Context, channelID snowflake.ID) error
	// PrivateChannels lists the DMs and group DMs a user is a recipient of.
	PrivateChannels(ctx context.Context, userID snowflake.ID) ([]Channel, error)

	PutRole(ctx context.Context, r Role) error
	DeleteRole(ctx context.Context, guildID, roleID snowflake.ID) error

	PutMember(ctx context.Context, m Member) error
	DeleteMember(ctx context.Context, guildID, userID snowflake.ID) error
	// UserGuilds lists the guilds a user is a member of.
	UserGuilds(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error)

	PutInvite(ctx context.Context, inv Invite) error
	GetInvite(ctx context.Context, code string) (Invite, error)
	DeleteInvite(ctx context.Context, code string) error
}

// Users stores accounts.
type Users interface {
	// CreateUser fails with ErrExists when the username is taken.
	CreateUser(ctx context.Context, u User) error
	PutUser(ctx context.Context, u User) error
	GetUser(ctx context.Context, id snowflake.ID) (User, error)
	GetUserByName(ctx context.Context, username string) (User, error)
}

// Store is everything a single-process Concord needs from storage.
type Store interface {
	Messages
	Guilds
	Users
	Moderation
	Webhooks
	ThreadMembers
	Close() error
}
