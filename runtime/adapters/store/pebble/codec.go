package pebble

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Value encoding. Every stored value starts with a one-byte format tag so
// the encoding can evolve without a migration: decoders switch on it.
//
//   - formatMessageV1 (messages, the hot and bulky table): a compact
//     binary record of uvarints, zigzag varints and length-prefixed
//     strings, fields in the order of encodeMessage. About a third of the
//     JSON size for a typical message.
//   - formatMessageV2: V1 followed by the embeds and components JSON
//     strings. New writes use it; V1 rows decode with neither.
//   - formatMessageV3: V2 followed by the webhook id, name and avatar.
//   - formatJSON (guild state and users: small, rarely written): the
//     tag followed by encoding/json of the store type.
const (
	formatMessageV1 byte = 1
	formatMessageV2 byte = 2
	formatMessageV3 byte = 3
	formatJSON      byte = 'J'
)

var errCorrupt = errors.New("pebble store: corrupt value")

func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("pebble store: encode %T: %w", v, err)
	}
	return append([]byte{formatJSON}, b...), nil
}

func decodeJSON(b []byte, v any) error {
	if len(b) == 0 || b[0] != formatJSON {
		return fmt.Errorf("%w: %T: unknown format", errCorrupt, v)
	}
	if err := json.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("%w: %T: %v", errCorrupt, v, err)
	}
	return nil
}

const (
	msgFlagTTS = 1 << iota
	msgFlagPinned
	msgFlagMentionEveryone
)

func encodeMessage(m *store.Message) []byte {
	n := 64 + len(m.Content) + len(m.Nonce) + len(m.Embeds) + len(m.Components) + 10*(len(m.Mentions)+len(m.MentionRoles))
	for _, a := range m.Attachments {
		n += 32 + len(a.Filename) + len(a.URL) + len(a.ContentType)
	}
	b := make([]byte, 0, n)
	b = append(b, formatMessageV3)
	b = binary.AppendUvarint(b, uint64(m.ID))
	b = binary.AppendUvarint(b, uint64(m.ChannelID))
	b = binary.AppendUvarint(b, uint64(m.GuildID))
	b = binary.AppendUvarint(b, uint64(m.AuthorID))
	b = appendString(b, m.Content)
	b = binary.AppendVarint(b, int64(m.Type))
	b = binary.AppendVarint(b, int64(m.Flags))
	var flags byte
	if m.TTS {
		flags |= msgFlagTTS
	}
	if m.Pinned {
		flags |= msgFlagPinned
	}
	if m.MentionEveryone {
		flags |= msgFlagMentionEveryone
	}
	b = append(b, flags)
	b = appendTime(b, m.EditedAt)
	b = binary.AppendUvarint(b, uint64(m.ReferenceID))
	b = appendIDs(b, m.Mentions)
	b = appendIDs(b, m.MentionRoles)
	b = binary.AppendUvarint(b, uint64(len(m.Attachments)))
	for _, a := range m.Attachments {
		b = binary.AppendUvarint(b, uint64(a.ID))
		b = appendString(b, a.Filename)
		b = binary.AppendVarint(b, int64(a.Size))
		b = appendString(b, a.URL)
		b = appendString(b, a.ContentType)
	}
	b = appendString(b, m.Nonce)
	b = appendString(b, m.Embeds)
	b = appendString(b, m.Components)
	b = binary.AppendUvarint(b, uint64(m.WebhookID))
	b = appendString(b, m.WebhookName)
	b = appendString(b, m.WebhookAvatar)
	return b
}

func decodeMessage(b []byte) (store.Message, error) {
	var m store.Message
	if len(b) == 0 || b[0] < formatMessageV1 || b[0] > formatMessageV3 {
		return m, fmt.Errorf("%w: message: unknown format", errCorrupt)
	}
	r := reader{b: b[1:]}
	m.ID = snowflake.ID(r.uvarint())
	m.ChannelID = snowflake.ID(r.uvarint())
	m.GuildID = snowflake.ID(r.uvarint())
	m.AuthorID = snowflake.ID(r.uvarint())
	m.Content = r.string()
	m.Type = int(r.varint())
	m.Flags = int(r.varint())
	flags := r.byte()
	m.TTS = flags&msgFlagTTS != 0
	m.Pinned = flags&msgFlagPinned != 0
	m.MentionEveryone = flags&msgFlagMentionEveryone != 0
	m.EditedAt = r.time()
	m.ReferenceID = snowflake.ID(r.uvarint())
	m.Mentions = r.ids()
	m.MentionRoles = r.ids()
	if n := r.count(); n > 0 {
		m.Attachments = make([]store.Attachment, n)
		for i := range m.Attachments {
			a := &m.Attachments[i]
			a.ID = snowflake.ID(r.uvarint())
			a.Filename = r.string()
			a.Size = int(r.varint())
			a.URL = r.string()
			a.ContentType = r.string()
		}
	}
	m.Nonce = r.string()
	if b[0] >= formatMessageV2 {
		m.Embeds = r.string()
		m.Components = r.string()
	}
	if b[0] >= formatMessageV3 {
		m.WebhookID = snowflake.ID(r.uvarint())
		m.WebhookName = r.string()
		m.WebhookAvatar = r.string()
	}
	if r.err != nil {
		return store.Message{}, fmt.Errorf("%w: message: %v", errCorrupt, r.err)
	}
	return m, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendIDs(b []byte, ids []snowflake.ID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id))
	}
	return b
}

// appendTime stores a zero time as 0 and any other as 1 + Unix nanoseconds
// (zigzag); times decode in UTC.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.AppendVarint(b, t.UnixNano())
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("truncated %s", what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("byte")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) || n > math.MaxInt32 { // every element takes >= 1 byte
		r.fail("count")
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.count()
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) ids() []snowflake.ID {
	n := r.count()
	if n == 0 {
		return nil
	}
	ids := make([]snowflake.ID, n)
	for i := range ids {
		ids[i] = snowflake.ID(r.uvarint())
	}
	return ids
}

func (r *reader) time() time.Time {
	if r.byte() == 0 {
		return time.Time{}
	}
	return time.Unix(0, r.varint()).UTC()
}
