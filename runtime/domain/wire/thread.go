package wire

import (
	"encoding/json"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ThreadMetadata is a thread channel's thread_metadata.
type ThreadMetadata struct {
	Archived            bool      `json:"archived"`
	AutoArchiveDuration int       `json:"auto_archive_duration"`
	ArchiveTimestamp    Timestamp `json:"archive_timestamp"`
	Locked              bool      `json:"locked"`
	Invitable           *bool     `json:"invitable,omitempty"`
	CreateTimestamp     Timestamp `json:"create_timestamp"`
}

// threadFields fills the thread-only fields of a thread channel.
func threadFields(out *Channel, c store.Channel) {
	t := c.Thread
	md := &ThreadMetadata{
		Archived: t.Archived, AutoArchiveDuration: t.AutoArchiveDuration,
		ArchiveTimestamp: Timestamp(t.ArchiveTimestamp), Locked: t.Locked,
		CreateTimestamp: Timestamp(t.CreatedAt),
	}
	if c.Type == store.ChannelPrivateThread {
		inv := t.Invitable
		md.Invitable = &inv
	}
	out.ThreadMetadata = md
	out.OwnerID = c.OwnerID
	mc, total, members := t.MessageCount, t.MessageCount, t.MemberCount
	out.MessageCount, out.TotalMessageSent, out.MemberCount = &mc, &total, &members
	// Threads carry no overwrites of their own: they use their parent's
	// (and the JSON leaves the field out, see threadChannel).
	out.PermissionOverwrites = []Overwrite{}
	if t.AppliedTags != nil {
		tags := append([]snowflake.ID{}, t.AppliedTags...)
		out.AppliedTags = &tags
	}
}

// threadChannel is a thread channel as Discord sends it: the thread's own
// fields, and none of those a guild channel has for itself (position,
// topic, permission_overwrites, nsfw, user_limit, bitrate) — a thread has
// its parent's. Channel.MarshalJSON writes threads in this shape.
type threadChannel struct {
	ID               snowflake.ID    `json:"id"`
	Type             int             `json:"type"`
	GuildID          snowflake.ID    `json:"guild_id"`
	Name             *string         `json:"name"`
	ParentID         *snowflake.ID   `json:"parent_id"`
	OwnerID          snowflake.ID    `json:"owner_id"`
	LastMessageID    *snowflake.ID   `json:"last_message_id"`
	RateLimitPerUser int             `json:"rate_limit_per_user"`
	Flags            int             `json:"flags"`
	ThreadMetadata   *ThreadMetadata `json:"thread_metadata"`
	MessageCount     *int            `json:"message_count"`
	TotalMessageSent *int            `json:"total_message_sent"`
	MemberCount      *int            `json:"member_count"`
	AppliedTags      *[]snowflake.ID `json:"applied_tags,omitempty"`
	Member           *ThreadMember   `json:"member,omitempty"`
	NewlyCreated     bool            `json:"newly_created,omitempty"`
}

// MarshalJSON writes a thread in Discord's thread shape (threadChannel)
// and any other channel with all of Channel's fields.
func (c Channel) MarshalJSON() ([]byte, error) {
	if c.ThreadMetadata == nil {
		type plain Channel // the same fields without this method
		return json.Marshal(plain(c))
	}
	return json.Marshal(threadChannel{
		ID: c.ID, Type: c.Type, GuildID: c.GuildID, Name: c.Name, ParentID: c.ParentID, OwnerID: c.OwnerID,
		LastMessageID: c.LastMessageID, RateLimitPerUser: c.RateLimitPerUser, Flags: c.Flags,
		ThreadMetadata: c.ThreadMetadata, MessageCount: c.MessageCount, TotalMessageSent: c.TotalMessageSent,
		MemberCount: c.MemberCount, AppliedTags: c.AppliedTags, Member: c.Member, NewlyCreated: c.NewlyCreated,
	})
}

// ThreadMember is Discord's thread member object.
type ThreadMember struct {
	ID            snowflake.ID `json:"id"`
	UserID        snowflake.ID `json:"user_id"`
	JoinTimestamp Timestamp    `json:"join_timestamp"`
	Flags         int          `json:"flags"`
	Member        *Member      `json:"member,omitempty"`
}

// ThreadMemberFrom converts a stored thread member.
func ThreadMemberFrom(m store.ThreadMember) ThreadMember {
	return ThreadMember{ID: m.ThreadID, UserID: m.UserID, JoinTimestamp: Timestamp(m.JoinedAt), Flags: m.Flags}
}

// ThreadMembersUpdate is the THREAD_MEMBERS_UPDATE payload.
type ThreadMembersUpdate struct {
	ID               snowflake.ID   `json:"id"`
	GuildID          snowflake.ID   `json:"guild_id"`
	MemberCount      int            `json:"member_count"`
	AddedMembers     []ThreadMember `json:"added_members,omitempty"`
	RemovedMemberIDs []snowflake.ID `json:"removed_member_ids,omitempty"`
}

// ThreadMemberUpdate is the THREAD_MEMBER_UPDATE payload: the current
// user's thread member with the guild id.
type ThreadMemberUpdate struct {
	ThreadMember
	GuildID snowflake.ID `json:"guild_id"`
}

// ThreadListSync is the THREAD_LIST_SYNC payload.
type ThreadListSync struct {
	GuildID    snowflake.ID   `json:"guild_id"`
	ChannelIDs []snowflake.ID `json:"channel_ids,omitempty"`
	Threads    []Channel      `json:"threads"`
	Members    []ThreadMember `json:"members"`
}
