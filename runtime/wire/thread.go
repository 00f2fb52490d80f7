package wire

import (
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
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
	// Threads carry no overwrites of their own: they use their parent's.
	out.PermissionOverwrites = []Overwrite{}
	if t.AppliedTags != nil {
		tags := append([]snowflake.ID{}, t.AppliedTags...)
		out.AppliedTags = &tags
	}
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
