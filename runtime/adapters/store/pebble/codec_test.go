package pebble

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func TestMessageCodec(t *testing.T) {
	full := store.Message{
		ID: 1<<63 + 5, ChannelID: 2, GuildID: 3, AuthorID: 4, Content: "héllo",
		Type: -1, Flags: 1 << 40, TTS: true, MentionEveryone: true,
		EditedAt:    time.Unix(1700000000, 123456789).UTC(),
		ReferenceID: 9, Mentions: []snowflake.ID{1, 2}, MentionRoles: []snowflake.ID{3},
		Attachments: []store.Attachment{{ID: 7, Filename: "f", Size: -3, URL: "u", ContentType: "c"}, {}},
		Nonce:       "n", Embeds: `[{"title":"t"}]`, Components: `[{"type":1,"components":[]}]`,
	}
	for _, m := range []store.Message{{}, full, {Pinned: true, Content: string(make([]byte, 70000))}} {
		enc := encodeMessage(&m)
		got, err := decodeMessage(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
		// Every truncation is detected, never a panic or a silent short read.
		for i := range enc {
			if _, err := decodeMessage(enc[:i]); !errors.Is(err, errCorrupt) {
				t.Fatalf("truncated at %d of %d: %v", i, len(enc), err)
			}
		}
	}
	// A V1 row (written before embeds were stored) still decodes.
	v1 := store.Message{ID: 1, ChannelID: 2, Content: "old", Nonce: "x"}
	enc := encodeMessage(&v1)
	enc[0] = formatMessageV1
	enc = enc[:len(enc)-2] // the two empty V2 strings
	if got, err := decodeMessage(enc); err != nil || !reflect.DeepEqual(got, v1) {
		t.Fatalf("v1 decode = %+v, %v", got, err)
	}
}
