// Package readstate is Concord's read-state role (`--roles=readstate`):
// per user and channel, the last message read, a mention count and a few
// flags — the same on every device.
//
// Records live in memory in an LRU sharded by user id over a wide-column
// table (the Store port: readstate/cassandra in production,
// readstate/pebble in dev; both pass readstate/storetest). A user's record
// is written through before the call that changed it returns — an ack, a
// mention counted or lowered — group-committed with the changes that
// arrive meanwhile, so an answered change survives kill -9 of the node.
// Channel records are written behind, every FlushInterval (30 s), and are
// rebuilt from the event log (see below). Every write goes through one
// serialised writer, so an older copy of a record never overwrites a
// newer one, and a user's writes are fenced by the epoch its owner claimed
// the user at (Config.Owns, Store.Claim), so neither does a stale owner's.
//
// Read states can be sharded by user over several services (a cluster's
// read-state replicas): a user's records then live on the user's owner
// only. The mention consumer is partitioned by channel instead: one member
// of the consumer group applies a channel's events at a time, keeps the
// channel's record, and hands each user mention to the user's owner
// (Config.Mentions; AddMentions on the owner writes it through before
// answering). Release lets go of users whose owner changed.
//
// Unread is a comparison, never a count query against the messages table:
// a channel is unread when the guild actor's last_message_id for it is
// above the user's LastReadID (Unread). Mention counts are counters fed
// from the event log:
//
//   - a user mention or a role mention adds one to each mentioned user's
//     record (role members are expanded through Roles), once per message;
//   - @everyone and @here add one entry to the channel's record — a single
//     write however many members the guild has — and a user's effective
//     count adds the entries above their LastReadID (States, ChannelState);
//   - a mention in a channel the user cannot see (Visibility) never counts.
//
// Exactly-once counting on an at-least-once log: every record remembers the
// log offset of the last event applied to it (NextOffset; a channel's events
// all sit in one partition, so offsets order them) and the messages its
// count counts (Mentions: a delete lowers the count only for a message
// there, whatever its age, and a copy of a counted message counts
// nothing), and a channel keeps the ids of its recently counted messages
// (an event the outbox published twice carries one message id at two
// offsets). The consumer marks an offset only
// after every change below it is durable (user mentions written through on
// their owners, channel records by a flush), so after a crash or a
// rebalance the log redelivers exactly what was not yet marked, and
// redelivered events already in a stored record are skipped wherever the
// user's owner is by then.
package readstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Sentinel errors.
var (
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("readstate: closed")
	// ErrStore wraps a failure of the Store.
	ErrStore = errors.New("readstate: store failed")
	// ErrForbidden means the user cannot see the channel.
	ErrForbidden = errors.New("readstate: channel not visible to user")
	// ErrNotOwner means this service does not own the user (Config.Owns),
	// or a later owner holds the user's records in the store (a claim at
	// a higher epoch fenced this one): the caller retries on the owner.
	ErrNotOwner = errors.New("readstate: user not owned by this service")
	// ErrFenced is what a Store returns when a claim or a write carries an
	// epoch below the one the user's records are held at (FencedError).
	ErrFenced = errors.New("readstate: user's records held at a later epoch")
)

// FencedError is a Store's refusal of some users' writes: their records
// are held at another epoch than the one the write carried. The other
// users of the same Write are written.
type FencedError struct {
	Users []snowflake.ID
}

// Error implements error.
func (e *FencedError) Error() string {
	return fmt.Sprintf("readstate: writes of %d users fenced by a later owner", len(e.Users))
}

// Is makes a FencedError match ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// MaxMentionIDs is how many counted mention ids a record keeps (Record.
// Mentions). A user with more unread mentions in one channel still has
// them counted; deleting one of the oldest then lowers nothing.
const MaxMentionIDs = 256

// Record is one user's stored read state in one channel: a row of the
// wide-column table, partition key user_id, clustering key channel_id.
type Record struct {
	UserID    snowflake.ID
	ChannelID snowflake.ID
	// LastReadID is the last message the user has read (acked).
	LastReadID snowflake.ID
	// MentionCount counts user and role mentions after LastReadID.
	MentionCount int32
	// Flags are client flags carried through unchanged.
	Flags uint32
	// Version increases with every ack; MESSAGE_ACK carries it.
	Version int64
	// NextOffset is one past the log offset of the last event applied to
	// this record (0: none).
	NextOffset int64
	// Mentions are the messages MentionCount counts, ascending, at most
	// MaxMentionIDs (the newest): a delete lowers the count only when its
	// message is here and takes it out, so a delete published twice
	// lowers nothing twice and a message of any age lowers its count.
	Mentions []snowflake.ID
	// Epoch is the owner epoch the user's records are held at in the
	// store (the same for all of one user's records): LoadUser reports
	// it, and Write changes a user's records only when it carries the
	// stored epoch (0: never claimed).
	Epoch int64
}

// ChannelMention is one @everyone or @here in a channel.
type ChannelMention struct {
	MessageID snowflake.ID
	AuthorID  snowflake.ID
}

// ChannelRecord is a channel's shared mention state: one row per channel,
// however many members can see it.
type ChannelRecord struct {
	ChannelID snowflake.ID
	// Everyone holds the newest @everyone/@here mentions, ascending by
	// message id, at most Config.ChannelMentions of them.
	Everyone []ChannelMention
	// NextOffset is one past the log offset of the last event applied.
	NextOffset int64
	// Seen are the channel's most recently counted messages with the
	// offset of their first event, to drop events published twice (same
	// message id, another offset), also when replayed.
	Seen []SeenMessage
}

// SeenMessage is a counted message and the offset it was counted at.
// Once a MESSAGE_DELETE of it is applied, Offset holds -(the delete's
// offset + 1) instead: a second delete of it (published twice) lowers no
// count again, and a replayed create of it counts nothing.
type SeenMessage struct {
	MessageID snowflake.ID
	Offset    int64
}

// Store is the read-state table. Implementations must make Write atomic
// per user on a single node (a Pebble batch; a Cassandra batch per
// partition).
//
// A user's records are fenced by an owner epoch (the read-state ring's
// revision a replica owns the user under): Claim raises it, and Write
// changes a user's records only when the records carry the epoch stored,
// so a replica that lost the user to a later claim can no longer
// overwrite what the new owner wrote (the comparison is in the store: a
// Pebble read under the store's lock, a Cassandra lightweight
// transaction on a static column of the user's partition).
type Store interface {
	// LoadUser returns every record of user (empty when none), each with
	// the user's stored Epoch.
	LoadUser(ctx context.Context, user snowflake.ID) ([]Record, error)
	// LoadChannel returns a channel's record; ok is false when none.
	LoadChannel(ctx context.Context, channel snowflake.ID) (rec ChannelRecord, ok bool, err error)
	// Claim holds user's records at epoch (> 0) and returns the epoch they
	// were held at before (0: never claimed). It fails with ErrFenced when
	// they are held at a higher epoch; claiming the held epoch again
	// changes nothing.
	Claim(ctx context.Context, user snowflake.ID, epoch int64) (prev int64, err error)
	// Write upserts records: a user's records only when their Epoch is the
	// user's stored epoch, else they are left alone and Write returns a
	// *FencedError naming those users after writing the others; channel
	// records unconditionally.
	Write(ctx context.Context, users []Record, channels []ChannelRecord) error
	// Close releases the store.
	Close() error
}

// Visibility answers whether a user can see a channel (VIEW_CHANNEL); the
// guild actors implement it. An answer given once ctx is done is no
// decision (a check that gave up answers false): callers look at ctx.
type Visibility interface {
	CanView(ctx context.Context, user, channel snowflake.ID) bool
}

// Roles expands a role mention; the guild actors implement it.
type Roles interface {
	RoleMembers(ctx context.Context, guild, role snowflake.ID) ([]snowflake.ID, error)
}

// State is a read state as READY's read_state entries carry it.
type State struct {
	ChannelID    snowflake.ID `json:"id"`
	LastReadID   snowflake.ID `json:"last_message_id"`
	MentionCount int          `json:"mention_count"`
	Flags        uint32       `json:"flags,omitempty"`
}

// MessageAck is the `d` of the MESSAGE_ACK dispatch sent to the acking
// user's other sessions so their badges clear.
type MessageAck struct {
	ChannelID    snowflake.ID `json:"channel_id"`
	MessageID    snowflake.ID `json:"message_id"`
	MentionCount int          `json:"mention_count"`
	Version      int64        `json:"version"`
}

// Unread reports whether a channel whose newest message is lastMessageID
// (the guild actor's last_message_id) has unread messages for s.
func Unread(lastMessageID snowflake.ID, s State) bool {
	return lastMessageID > s.LastReadID
}
