package eventlog

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeMessageEvent: a record value read from the log (bytes from
// the broker) decodes to an event with both ids or fails with ErrInvalid;
// a decoded event re-encodes to a record that decodes to the same event.
func FuzzDecodeMessageEvent(f *testing.F) {
	seed, _ := MessageEvent{Type: MessageCreate, GuildID: 1, ChannelID: 2, MessageID: 3, AuthorID: 4, Mentions: nil, Content: "hi"}.Record()
	f.Add(seed.Value)
	f.Add([]byte(`{"type":"MESSAGE_DELETE","channel_id":"2","message_id":"3"}`))
	f.Add([]byte(`{"channel_id":"0","message_id":"3"}`))
	f.Add([]byte(`{"channel_id":2,"message_id":-1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeMessageEvent(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if ev.ChannelID == 0 || ev.MessageID == 0 {
			t.Fatalf("decoded an event without ids: %+v", ev)
		}
		rec, err := ev.Record()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := DecodeMessageEvent(rec.Value)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(ev, again) {
			t.Fatalf("round trip changed the event: %+v then %+v", ev, again)
		}
	})
}
