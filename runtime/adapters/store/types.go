package store

import (
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Channel types, as Discord numbers them.
const (
	ChannelText     = 0
	ChannelDM       = 1
	ChannelVoice    = 2
	ChannelGroupDM  = 3
	ChannelCategory = 4
)

// Overwrite target types.
const (
	OverwriteRole   = 0
	OverwriteMember = 1
)

// User is an account: a person or a bot.
type User struct {
	ID         snowflake.ID
	Username   string
	GlobalName string
	Bot        bool
	// PasswordHash is the encoded argon2id hash; empty for bots.
	PasswordHash string
	// TokenGeneration is bumped to revoke every token issued before.
	TokenGeneration uint32
	CreatedAt       time.Time
}

// Guild is a guild's own record (its channels, roles and members are
// stored beside it).
type Guild struct {
	ID          snowflake.ID
	Name        string
	Icon        string
	OwnerID     snowflake.ID
	Description string
	CreatedAt   time.Time
}

// Overwrite is a channel permission overwrite for a role or a member.
type Overwrite struct {
	ID    snowflake.ID
	Type  int // OverwriteRole or OverwriteMember
	Allow uint64
	Deny  uint64
}

// Channel is a guild channel, a DM or a group DM. GuildID is zero for
// private channels, which list their Recipients instead.
type Channel struct {
	ID               snowflake.ID
	GuildID          snowflake.ID
	Type             int
	Name             string
	Topic            string
	Position         int
	ParentID         snowflake.ID
	NSFW             bool
	RateLimitPerUser int // seconds
	Bitrate          int
	UserLimit        int
	Overwrites       []Overwrite
	Recipients       []snowflake.ID
	OwnerID          snowflake.ID // group DM owner; a thread's creator
	LastMessageID    snowflake.ID
	// Thread is set on thread channels (IsThread) only.
	Thread *ThreadMeta `json:",omitempty"`
	// AvailableTags are a forum channel's tags (ChannelForum only).
	AvailableTags []ForumTag `json:",omitempty"`
	// RTCRegion is a voice or stage channel's voice region id; empty is
	// automatic (Discord's null).
	RTCRegion string `json:",omitempty"`
}

// Role is a guild role. The @everyone role's id equals the guild id.
type Role struct {
	ID          snowflake.ID
	GuildID     snowflake.ID
	Name        string
	Color       int
	Hoist       bool
	Position    int
	Permissions uint64
	Managed     bool
	Mentionable bool
	// SecondaryColor and TertiaryColor are the gradient colours of
	// Discord's role colors object (nil: none); Color is the primary.
	SecondaryColor *int `json:",omitempty"`
	TertiaryColor  *int `json:",omitempty"`
}

// Member is a user's membership of a guild.
type Member struct {
	GuildID snowflake.ID
	UserID  snowflake.ID
	Nick    string
	Roles   []snowflake.ID
	// JoinedAt is when the user joined.
	JoinedAt time.Time
	// CommunicationDisabledUntil is a timeout; zero means none.
	CommunicationDisabledUntil time.Time
}

// Invite lets a user join a guild.
type Invite struct {
	Code      string
	GuildID   snowflake.ID
	ChannelID snowflake.ID
	InviterID snowflake.ID
	MaxUses   int
	Uses      int
	MaxAge    int // seconds, 0 = never expires
	CreatedAt time.Time
}

// GuildState is everything a guild actor loads on first use.
type GuildState struct {
	Guild    Guild
	Channels []Channel
	Roles    []Role
	Members  []Member
}

// Message is one stored message.
type Message struct {
	ID        snowflake.ID
	ChannelID snowflake.ID
	GuildID   snowflake.ID
	AuthorID  snowflake.ID
	Content   string
	Type      int
	Flags     int
	TTS       bool
	Pinned    bool
	// EditedAt is zero when the message was never edited.
	EditedAt time.Time
	// ReferenceID is the replied-to message (same channel), or zero.
	ReferenceID     snowflake.ID
	MentionEveryone bool
	Mentions        []snowflake.ID
	MentionRoles    []snowflake.ID
	// Attachments are references to objects stored elsewhere.
	Attachments []Attachment
	Nonce       string
	// Embeds and Components are the message's embeds and components as
	// JSON arrays, validated and normalised by the API before they are
	// stored; empty means none.
	Embeds     string
	Components string
	// WebhookID is the webhook that posted the message (AuthorID is then
	// the webhook's id too), with the name and avatar it posted under.
	WebhookID     snowflake.ID
	WebhookName   string
	WebhookAvatar string
}

// Attachment references a file kept in object storage.
type Attachment struct {
	ID       snowflake.ID
	Filename string
	Size     int
	// URL is the object's key in the object store; responses carry a
	// signed, expiring URL made from it.
	URL string
	// ContentType is sniffed from the bytes when uploaded, never taken
	// from the client.
	ContentType string
}
