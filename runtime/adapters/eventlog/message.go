package eventlog

import (
	"encoding/json"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// MessagesTopic is the topic of message events, keyed by channel id.
const MessagesTopic = "concord.messages"

// Message event types, as Discord names the dispatches.
const (
	MessageCreate = "MESSAGE_CREATE"
	MessageUpdate = "MESSAGE_UPDATE"
	MessageDelete = "MESSAGE_DELETE"
)

// MessageEvent is the payload of a record on MessagesTopic: what durable
// consumers need to know about a message, not the full Discord object.
type MessageEvent struct {
	// Type is MessageCreate, MessageUpdate or MessageDelete.
	Type      string       `json:"t"`
	GuildID   snowflake.ID `json:"guild_id,omitempty"`
	ChannelID snowflake.ID `json:"channel_id"`
	// MessageID identifies the message; consumers dedupe by it.
	MessageID snowflake.ID `json:"id"`
	AuthorID  snowflake.ID `json:"author_id,omitempty"`
	// Mentions are the users mentioned, MentionRoles the roles.
	Mentions     []snowflake.ID `json:"mentions,omitempty"`
	MentionRoles []snowflake.ID `json:"mention_roles,omitempty"`
	// MentionEveryone is set for @everyone and @here when the author may
	// use them.
	MentionEveryone bool `json:"mention_everyone,omitempty"`
	// Content is the message text (empty for deletes).
	Content string `json:"content,omitempty"`
}

// Record encodes e as a record on MessagesTopic keyed by channel id.
func (e MessageEvent) Record() (Record, error) {
	v, err := json.Marshal(e)
	if err != nil {
		return Record{}, fmt.Errorf("eventlog: encode %s %d: %w", e.Type, e.MessageID, err)
	}
	return Record{Topic: MessagesTopic, Key: ChannelKey(e.ChannelID), Value: v}, nil
}

// ChannelKey is the record key of a channel's events.
func ChannelKey(id snowflake.ID) []byte { return []byte(id.String()) }

// DecodeMessageEvent decodes the value of a record on MessagesTopic.
func DecodeMessageEvent(value []byte) (MessageEvent, error) {
	var e MessageEvent
	if err := json.Unmarshal(value, &e); err != nil {
		return MessageEvent{}, fmt.Errorf("%w: decode message event: %v", ErrInvalid, err)
	}
	if e.MessageID == 0 || e.ChannelID == 0 {
		return MessageEvent{}, fmt.Errorf("%w: message event without ids", ErrInvalid)
	}
	return e, nil
}
