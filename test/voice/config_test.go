package voice

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// TestICEServersValidated: the ICE servers handed to WebRTC clients are
// checked when the server is made: a malformed URL, or a TURN server
// without credentials, is a configuration error naming it.
func TestICEServersValidated(t *testing.T) {
	key, err := token.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		servers []voice.ICEServer
		want    string
	}{
		{[]voice.ICEServer{{}}, "no URL"},
		{[]voice.ICEServer{{URLs: []string{"http://turn.example"}}}, "http://turn.example"},
		{[]voice.ICEServer{{URLs: []string{"turn:turn.example:3478"}}}, "needs a username and credential"},
		{[]voice.ICEServer{{URLs: []string{"turn:turn.example:3478"}, Username: "u"}}, "needs a username and credential"},
	} {
		_, err := voice.New(voice.Config{ID: "x", UDPAddr: "127.0.0.1:0", TrustedKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)},
			WebRTC: &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0", ICEServers: tc.servers}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ICE servers %+v: %v, want an error with %q", tc.servers, err, tc.want)
		}
	}
}

// TestReadyICEServers: Ready carries the ICE servers when the WebRTC
// transport is on, and none without it.
func TestReadyICEServers(t *testing.T) {
	stun := []voice.ICEServer{{URLs: []string{"stun:127.0.0.1:3478"}}}
	on := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0", ICEServers: stun} })
	off := startSFU(t, nil)
	ctx := ctxT(t)
	if got := on.connect(ctx, on.newUser(channelID), "").Ready.ICEServers; len(got) != 1 || got[0].URLs[0] != "stun:127.0.0.1:3478" {
		t.Fatalf("Ready's ice_servers with WebRTC on: %+v", got)
	}
	if got := off.connect(ctx, off.newUser(channelID), "").Ready.ICEServers; len(got) != 0 {
		t.Fatalf("Ready's ice_servers without WebRTC: %+v", got)
	}
}
