package gateway

import (
	"encoding/json"
	"testing"
)

func TestParseVoiceStateUpdate(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    VoiceStateUpdate
		wantErr bool
	}{
		{in: `{"guild_id":"11","channel_id":"22","self_mute":true,"self_deaf":false}`, want: VoiceStateUpdate{GuildID: 11, ChannelID: 22, SelfMute: true}},
		// discord.py sends numbers, and null to leave.
		{in: `{"guild_id":11,"channel_id":null,"self_mute":false,"self_deaf":true}`, want: VoiceStateUpdate{GuildID: 11, SelfDeaf: true}},
		{in: `{"channel_id":"22"}`, wantErr: true},
		{in: `{"guild_id":"x"}`, wantErr: true},
		{in: `[]`, wantErr: true},
	} {
		got, err := ParseVoiceStateUpdate(json.RawMessage(tc.in))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v, err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseVoiceStateUpdate: op 4's decoder never panics, and what it
// accepts names a guild.
func FuzzParseVoiceStateUpdate(f *testing.F) {
	for _, s := range []string{`{"guild_id":"11","channel_id":"22","self_mute":true}`, `{"guild_id":1,"channel_id":null}`, `{}`, `null`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := ParseVoiceStateUpdate(b)
		if err == nil && u.GuildID == 0 {
			t.Fatalf("accepted %q without a guild", b)
		}
	})
}
