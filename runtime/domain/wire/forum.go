package wire

import (
	"encoding/json"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ForumTag is Discord's forum tag object.
type ForumTag struct {
	ID        snowflake.ID  `json:"id"`
	Name      string        `json:"name"`
	Moderated bool          `json:"moderated"`
	EmojiID   *snowflake.ID `json:"emoji_id"`
	EmojiName *string       `json:"emoji_name"`
}

// ForumTagFrom converts a stored forum tag.
func ForumTagFrom(t store.ForumTag) ForumTag {
	out := ForumTag{ID: t.ID, Name: t.Name, Moderated: t.Moderated, EmojiID: optionalID(t.EmojiID)}
	if t.EmojiName != "" {
		n := t.EmojiName
		out.EmojiName = &n
	}
	return out
}

// forumFields fills a forum channel's fields: its tags, and the defaults
// Discord sends (no default reaction, sort order or layout set).
func forumFields(out *Channel, c store.Channel) {
	tags := make([]ForumTag, 0, len(c.AvailableTags))
	for _, t := range c.AvailableTags {
		tags = append(tags, ForumTagFrom(t))
	}
	out.AvailableTags = &tags
	layout, slow, archive := 0, 0, 1440
	out.DefaultReactionEmoji, out.DefaultSortOrder = json.RawMessage("null"), json.RawMessage("null")
	out.DefaultForumLayout, out.DefaultThreadRateLimitPerUser, out.DefaultAutoArchiveDuration = &layout, &slow, &archive
}
