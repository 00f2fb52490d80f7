package store

import "github.com/concord-chat/concord/runtime/base/snowflake"

// ChannelForum is a forum channel (type 15): it holds no messages of its
// own, only posts, which are public threads opened with a starter message
// and tagged from its available tags.
const ChannelForum = 15

// ForumTag is one of a forum channel's available_tags. Moderated tags are
// applied only by holders of MANAGE_THREADS. EmojiID or EmojiName (a
// unicode emoji) is the tag's emoji, when it has one.
type ForumTag struct {
	ID        snowflake.ID
	Name      string
	Moderated bool
	EmojiID   snowflake.ID `json:",omitempty"`
	EmojiName string       `json:",omitempty"`
}
