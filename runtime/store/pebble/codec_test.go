package pebble

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

func TestMessageCodec(t *testing.T) {
	full := store.Message{
		ID: 1<<63 + 5, ChannelID: 2, GuildID: 3, AuthorID: 4, Content: "héllo",
		Type: -1, Flags: 1 << 40, TTS: true, MentionEveryone: true,
		EditedAt:    time.Unix(1700000000, 123456789).UTC(),
		ReferenceID: 9, Mentions: []snowflake.ID{1, 2}, MentionRoles: []snowflake.ID{3},
		Attachments: []store.Attachment{{ID: 7, Filename: "f", Size: -3, URL: "u", ContentType: "c"}, {}},
		Nonce:       "n",
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
}
