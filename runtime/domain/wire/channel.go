package wire

import (
	"encoding/json"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Overwrite is a channel permission overwrite.
type Overwrite struct {
	ID    snowflake.ID `json:"id"`
	Type  int          `json:"type"`
	Allow Bits         `json:"allow"`
	Deny  Bits         `json:"deny"`
}

// Channel is Discord's channel object for guild channels, DMs and group
// DMs. Guild-only fields are present for every type (libraries read them
// without checking the type); DM-only fields are omitted for guild channels.
// Threads are written in their own shape (threadChannel, thread.go).
type Channel struct {
	ID                   snowflake.ID  `json:"id"`
	Type                 int           `json:"type"`
	GuildID              snowflake.ID  `json:"guild_id,omitempty"`
	Name                 *string       `json:"name"`
	Position             int           `json:"position"`
	ParentID             *snowflake.ID `json:"parent_id"`
	PermissionOverwrites []Overwrite   `json:"permission_overwrites"`
	Topic                *string       `json:"topic"`
	NSFW                 bool          `json:"nsfw"`
	LastMessageID        *snowflake.ID `json:"last_message_id"`
	RateLimitPerUser     int           `json:"rate_limit_per_user"`
	Bitrate              int           `json:"bitrate,omitempty"`
	UserLimit            int           `json:"user_limit"`
	// RTCRegion is a voice or stage channel's region id, or null
	// (automatic: the guild places the call in the region nearest its
	// first joiner). Absent for other channel types.
	RTCRegion  json.RawMessage `json:"rtc_region,omitempty"`
	Flags      int             `json:"flags"`
	Recipients *[]User         `json:"recipients,omitempty"`
	OwnerID    snowflake.ID    `json:"owner_id,omitempty"`
	Icon       *string         `json:"icon,omitempty"`
	// Thread-only fields (threads.go).
	ThreadMetadata   *ThreadMetadata `json:"thread_metadata,omitempty"`
	MessageCount     *int            `json:"message_count,omitempty"`
	TotalMessageSent *int            `json:"total_message_sent,omitempty"`
	MemberCount      *int            `json:"member_count,omitempty"`
	// Member is the viewer's own thread member, where Discord includes it
	// (the answer to a thread's creation).
	Member *ThreadMember `json:"member,omitempty"`
	// NewlyCreated marks the THREAD_CREATE of a thread just created.
	NewlyCreated bool `json:"newly_created,omitempty"`
	// AvailableTags are a forum channel's tags (forum.go).
	AvailableTags *[]ForumTag `json:"available_tags,omitempty"`
	// AppliedTags are a forum post's tags.
	AppliedTags *[]snowflake.ID `json:"applied_tags,omitempty"`
	// A forum's defaults, sent as Discord sends them for a forum that set
	// none (forum.go); absent for other types.
	DefaultReactionEmoji          json.RawMessage `json:"default_reaction_emoji,omitempty"`
	DefaultSortOrder              json.RawMessage `json:"default_sort_order,omitempty"`
	DefaultForumLayout            *int            `json:"default_forum_layout,omitempty"`
	DefaultThreadRateLimitPerUser *int            `json:"default_thread_rate_limit_per_user,omitempty"`
	DefaultAutoArchiveDuration    *int            `json:"default_auto_archive_duration,omitempty"`
}

// channelStage is a stage channel (type 13): a voice channel too.
const channelStage = 13

// optionalID returns nil for zero.
func optionalID(id snowflake.ID) *snowflake.ID {
	if id == 0 {
		return nil
	}
	return &id
}

// ChannelFrom converts a stored channel. recipients are the user objects
// of a private channel's recipients other than the viewer (nil for guild
// channels).
func ChannelFrom(c store.Channel, recipients []User) Channel {
	ow := make([]Overwrite, 0, len(c.Overwrites))
	for _, o := range c.Overwrites {
		ow = append(ow, Overwrite{ID: o.ID, Type: o.Type, Allow: Bits(o.Allow), Deny: Bits(o.Deny)})
	}
	out := Channel{
		ID:                   c.ID,
		Type:                 c.Type,
		GuildID:              c.GuildID,
		Position:             c.Position,
		ParentID:             optionalID(c.ParentID),
		PermissionOverwrites: ow,
		NSFW:                 c.NSFW,
		LastMessageID:        optionalID(c.LastMessageID),
		RateLimitPerUser:     c.RateLimitPerUser,
		UserLimit:            c.UserLimit,
	}
	if c.Type == store.ChannelVoice || c.Type == channelStage {
		out.RTCRegion = json.RawMessage("null")
		if c.RTCRegion != "" {
			out.RTCRegion, _ = json.Marshal(c.RTCRegion)
		}
		out.Bitrate = c.Bitrate
		if out.Bitrate == 0 {
			out.Bitrate = 64000
		}
	}
	if c.Name != "" || c.GuildID != 0 {
		name := c.Name
		out.Name = &name
	}
	if c.Topic != "" {
		topic := c.Topic
		out.Topic = &topic
	}
	if c.GuildID == 0 {
		if recipients == nil {
			recipients = []User{}
		}
		out.Recipients = &recipients
		if c.Type == store.ChannelGroupDM {
			out.OwnerID = c.OwnerID
		}
	}
	if c.Type == store.ChannelForum {
		forumFields(&out, c)
	}
	if c.Thread != nil {
		threadFields(&out, c)
	}
	return out
}

// ChannelDelete is the payload of CHANNEL_DELETE: the channel itself.
type ChannelDelete = Channel

// WebhooksUpdate is the WEBHOOKS_UPDATE payload.
type WebhooksUpdate struct {
	GuildID   snowflake.ID `json:"guild_id"`
	ChannelID snowflake.ID `json:"channel_id"`
}
