package wire

import (
	"encoding/json"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Message types Concord produces.
const (
	MessageDefault = 0
	// MessageThreadCreated is the system message a public thread started
	// without a message leaves in its parent: content is the thread's
	// name and message_reference names the thread (channel_id only).
	MessageThreadCreated = 18
	MessageReply         = 19
	// MessageThreadStarter is the first message of a thread started from
	// a message: message_reference and referenced_message are the
	// starter message in the parent channel.
	MessageThreadStarter = 21
)

// MessageReference points at the message a reply answers.
type MessageReference struct {
	Type            int          `json:"type"`
	MessageID       snowflake.ID `json:"message_id,omitempty"`
	ChannelID       snowflake.ID `json:"channel_id"`
	GuildID         snowflake.ID `json:"guild_id,omitempty"`
	FailIfNotExists *bool        `json:"fail_if_not_exists,omitempty"`
}

// Attachment is Discord's attachment object.
type Attachment struct {
	ID          snowflake.ID `json:"id"`
	Filename    string       `json:"filename"`
	Size        int          `json:"size"`
	URL         string       `json:"url"`
	ProxyURL    string       `json:"proxy_url"`
	ContentType string       `json:"content_type,omitempty"`
}

// Message is Discord's message object as REST returns it and MESSAGE_CREATE
// and MESSAGE_UPDATE carry it.
type Message struct {
	ID                snowflake.ID      `json:"id"`
	ChannelID         snowflake.ID      `json:"channel_id"`
	GuildID           snowflake.ID      `json:"guild_id,omitempty"`
	Author            User              `json:"author"`
	Member            *Member           `json:"member,omitempty"`
	Content           string            `json:"content"`
	Timestamp         Timestamp         `json:"timestamp"`
	EditedTimestamp   *Timestamp        `json:"edited_timestamp"`
	TTS               bool              `json:"tts"`
	MentionEveryone   bool              `json:"mention_everyone"`
	Mentions          []User            `json:"mentions"`
	MentionRoles      []snowflake.ID    `json:"mention_roles"`
	Attachments       []Attachment      `json:"attachments"`
	Embeds            []json.RawMessage `json:"embeds"`
	Components        []json.RawMessage `json:"components"`
	Reactions         []Reaction        `json:"reactions,omitempty"`
	Pinned            bool              `json:"pinned"`
	Type              int               `json:"type"`
	Flags             int               `json:"flags"`
	Nonce             json.RawMessage   `json:"nonce,omitempty"`
	MessageReference  *MessageReference `json:"message_reference,omitempty"`
	ReferencedMessage *Message          `json:"referenced_message,omitempty"`
	// WebhookID is set on messages a webhook posted.
	WebhookID snowflake.ID `json:"webhook_id,omitempty"`
	// Thread is the thread a message started (flag HAS_THREAD), as the
	// viewer sees it.
	Thread *Channel `json:"thread,omitempty"`
}

// MessageFrom converts a stored message. author is its author's user
// object, member the author's partial member (nil in DMs), mentions the
// mentioned users' objects in the order of m.Mentions (missing users are
// skipped by the caller) and ref the replied-to message when it still exists.
func MessageFrom(m store.Message, author User, member *Member, mentions []User, ref *Message) Message {
	if mentions == nil {
		mentions = []User{}
	}
	roles := m.MentionRoles
	if roles == nil {
		roles = []snowflake.ID{}
	}
	atts := make([]Attachment, 0, len(m.Attachments))
	for _, a := range m.Attachments {
		atts = append(atts, Attachment{ID: a.ID, Filename: a.Filename, Size: a.Size, URL: a.URL, ProxyURL: a.URL, ContentType: a.ContentType})
	}
	out := Message{
		ID:              m.ID,
		ChannelID:       m.ChannelID,
		GuildID:         m.GuildID,
		Author:          author,
		Member:          member,
		Content:         m.Content,
		Timestamp:       Timestamp(m.ID.Time()),
		EditedTimestamp: OptionalTimestamp(m.EditedAt),
		TTS:             m.TTS,
		MentionEveryone: m.MentionEveryone,
		Mentions:        mentions,
		MentionRoles:    roles,
		Attachments:     atts,
		Embeds:          RawList(m.Embeds),
		Components:      RawList(m.Components),
		Pinned:          m.Pinned,
		Type:            m.Type,
		Flags:           m.Flags,
		Nonce:           NonceJSON(m.Nonce),
	}
	if m.ReferenceID != 0 {
		out.MessageReference = &MessageReference{MessageID: m.ReferenceID, ChannelID: m.ChannelID, GuildID: m.GuildID}
		out.ReferencedMessage = ref
	}
	return out
}

// RawList splits a stored JSON array (embeds, components) into its
// elements; empty or malformed input is an empty list, never null.
func RawList(s string) []json.RawMessage {
	if s == "" {
		return []json.RawMessage{}
	}
	var out []json.RawMessage
	if err := json.Unmarshal([]byte(s), &out); err != nil || out == nil {
		return []json.RawMessage{}
	}
	return out
}

// JoinRaw is RawList's inverse: the JSON array of elements, "" for none.
func JoinRaw(elems []json.RawMessage) string {
	if len(elems) == 0 {
		return ""
	}
	b, err := json.Marshal(elems)
	if err != nil {
		return ""
	}
	return string(b)
}

// NonceJSON returns the stored nonce as it was sent: stored nonces that
// were JSON numbers keep a leading '#'; others are strings. Empty means
// no nonce.
func NonceJSON(nonce string) json.RawMessage {
	if nonce == "" {
		return nil
	}
	if nonce[0] == '#' {
		return json.RawMessage(nonce[1:])
	}
	b, _ := json.Marshal(nonce)
	return b
}

// StripContent returns a copy of m without content, embeds, attachments
// and components: what a bot without the MESSAGE_CONTENT intent sees.
func StripContent(m Message) Message {
	m.Content = ""
	m.Embeds = []json.RawMessage{}
	m.Attachments = []Attachment{}
	m.Components = []json.RawMessage{}
	if m.ReferencedMessage != nil {
		ref := StripContent(*m.ReferencedMessage)
		m.ReferencedMessage = &ref
	}
	return m
}

// MessageDelete is MESSAGE_DELETE.
type MessageDelete struct {
	ID        snowflake.ID `json:"id"`
	ChannelID snowflake.ID `json:"channel_id"`
	GuildID   snowflake.ID `json:"guild_id,omitempty"`
}

// MessageDeleteBulk is MESSAGE_DELETE_BULK.
type MessageDeleteBulk struct {
	IDs       []snowflake.ID `json:"ids"`
	ChannelID snowflake.ID   `json:"channel_id"`
	GuildID   snowflake.ID   `json:"guild_id,omitempty"`
}

// TypingStart is TYPING_START; Timestamp is Unix seconds.
type TypingStart struct {
	ChannelID snowflake.ID `json:"channel_id"`
	GuildID   snowflake.ID `json:"guild_id,omitempty"`
	UserID    snowflake.ID `json:"user_id"`
	Timestamp int64        `json:"timestamp"`
	Member    *Member      `json:"member,omitempty"`
}
