package store

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Thread channel types, as Discord numbers them.
const (
	ChannelAnnouncementThread = 10
	ChannelPublicThread       = 11
	ChannelPrivateThread      = 12
)

// IsThread reports whether a channel type is a thread.
func IsThread(typ int) bool {
	return typ == ChannelAnnouncementThread || typ == ChannelPublicThread || typ == ChannelPrivateThread
}

// ThreadMeta is the thread-only part of a thread channel (Channel.Thread).
// A thread's ParentID is the channel it lives in and OwnerID its creator.
type ThreadMeta struct {
	Archived bool
	// AutoArchiveDuration is in minutes: 60, 1440, 4320 or 10080.
	AutoArchiveDuration int
	// ArchiveTimestamp is when the archive state last changed (creation
	// when it never did).
	ArchiveTimestamp time.Time
	Locked           bool
	// Invitable lets non-moderators add others to a private thread.
	Invitable bool
	CreatedAt time.Time
	// MessageCount counts the messages sent in the thread (the starter
	// message excluded), as Discord's message_count and
	// total_message_sent do (deletes are not subtracted).
	MessageCount int
	// MemberCount is the number of members, kept with the member rows.
	MemberCount int
	// AppliedTags are the ids of the parent forum's tags on a post.
	AppliedTags []snowflake.ID
}

// ThreadMember is a user's membership of a thread.
type ThreadMember struct {
	ThreadID snowflake.ID
	UserID   snowflake.ID
	JoinedAt time.Time
	Flags    int
}

// ThreadMembers stores who has joined each thread. Writes are durable on
// return.
type ThreadMembers interface {
	// PutThreadMember adds a member; false when the user already was one.
	PutThreadMember(ctx context.Context, m ThreadMember) (bool, error)
	// DeleteThreadMember removes a member; false when the user was not one.
	DeleteThreadMember(ctx context.Context, threadID, userID snowflake.ID) (bool, error)
	// ThreadMembers lists a thread's members by user id ascending.
	ThreadMembers(ctx context.Context, threadID snowflake.ID) ([]ThreadMember, error)
}
