package wire

import "github.com/concord-chat/concord/runtime/base/snowflake"

// Emoji is Discord's partial emoji object as reactions carry it: a
// unicode emoji has only a name, a custom emoji an id and a name.
type Emoji struct {
	ID       *snowflake.ID `json:"id"`
	Name     string        `json:"name"`
	Animated bool          `json:"animated,omitempty"`
}

// ReactionCountDetails splits a reaction count into normal and super
// (burst) reactions; Concord has only normal ones.
type ReactionCountDetails struct {
	Burst  int `json:"burst"`
	Normal int `json:"normal"`
}

// Reaction is one entry of a message's reactions: an emoji, how many
// users added it and whether the viewer did.
type Reaction struct {
	Count        int                  `json:"count"`
	CountDetails ReactionCountDetails `json:"count_details"`
	Me           bool                 `json:"me"`
	MeBurst      bool                 `json:"me_burst"`
	Emoji        Emoji                `json:"emoji"`
	BurstColors  []string             `json:"burst_colors"`
}

// ReactionAdd is MESSAGE_REACTION_ADD.
type ReactionAdd struct {
	UserID          snowflake.ID `json:"user_id"`
	ChannelID       snowflake.ID `json:"channel_id"`
	MessageID       snowflake.ID `json:"message_id"`
	GuildID         snowflake.ID `json:"guild_id,omitempty"`
	Member          *Member      `json:"member,omitempty"`
	Emoji           Emoji        `json:"emoji"`
	MessageAuthorID snowflake.ID `json:"message_author_id,omitempty"`
	Burst           bool         `json:"burst"`
	BurstColors     []string     `json:"burst_colors"`
	Type            int          `json:"type"`
}

// ReactionRemove is MESSAGE_REACTION_REMOVE.
type ReactionRemove struct {
	UserID    snowflake.ID `json:"user_id"`
	ChannelID snowflake.ID `json:"channel_id"`
	MessageID snowflake.ID `json:"message_id"`
	GuildID   snowflake.ID `json:"guild_id,omitempty"`
	Emoji     Emoji        `json:"emoji"`
	Burst     bool         `json:"burst"`
	Type      int          `json:"type"`
}

// ReactionRemoveAll is MESSAGE_REACTION_REMOVE_ALL.
type ReactionRemoveAll struct {
	ChannelID snowflake.ID `json:"channel_id"`
	MessageID snowflake.ID `json:"message_id"`
	GuildID   snowflake.ID `json:"guild_id,omitempty"`
}

// ReactionRemoveEmoji is MESSAGE_REACTION_REMOVE_EMOJI.
type ReactionRemoveEmoji struct {
	ChannelID snowflake.ID `json:"channel_id"`
	MessageID snowflake.ID `json:"message_id"`
	GuildID   snowflake.ID `json:"guild_id,omitempty"`
	Emoji     Emoji        `json:"emoji"`
}

// ChannelPinsUpdate is CHANNEL_PINS_UPDATE; LastPinTimestamp is nil when
// the channel has no pins left.
type ChannelPinsUpdate struct {
	GuildID          snowflake.ID `json:"guild_id,omitempty"`
	ChannelID        snowflake.ID `json:"channel_id"`
	LastPinTimestamp *Timestamp   `json:"last_pin_timestamp"`
}
