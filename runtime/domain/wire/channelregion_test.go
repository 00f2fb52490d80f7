package wire

import (
	"encoding/json"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// TestChannelRTCRegion: a voice channel's rtc_region is its region id, or
// null when automatic; a text channel has none.
func TestChannelRTCRegion(t *testing.T) {
	for _, c := range []struct {
		ch   store.Channel
		want string // "" means absent
	}{
		{store.Channel{ID: 1, GuildID: 2, Type: store.ChannelVoice, Name: "v", RTCRegion: "eu-west"}, `"eu-west"`},
		{store.Channel{ID: 1, GuildID: 2, Type: store.ChannelVoice, Name: "v"}, `null`},
		{store.Channel{ID: 1, GuildID: 2, Type: store.ChannelText, Name: "t", RTCRegion: "eu-west"}, ""},
	} {
		b, err := json.Marshal(ChannelFrom(c.ch, nil))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if got, ok := m["rtc_region"]; string(got) != c.want || ok != (c.want != "") {
			t.Errorf("type %d region %q: rtc_region %s (present %v), want %q", c.ch.Type, c.ch.RTCRegion, got, ok, c.want)
		}
	}
}
