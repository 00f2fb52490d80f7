package voice

import (
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// TestControlCommands: a signed command sets a participant's server mute
// and is obeyed once; forged, expired, replayed and other servers'
// commands change nothing; a join after a mute starts muted even with a
// token signed before it.
func TestControlCommands(t *testing.T) {
	key, _ := token.GenerateKey()
	other, _ := token.GenerateKey()
	now := time.Unix(1_800_000_000, 0)
	clock := now
	srv, err := New(Config{ID: "sfu-a", UDPAddr: "127.0.0.1:0", Readers: 1, TrustedKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.md.close)
	p := &participant{userID: 7, ssrc: 100}
	srv.join(p, callKey{1, 2})
	hs := httptest.NewServer(srv.ControlHandler())
	t.Cleanup(hs.Close)
	post := func(cmd string) (int, ControlResult) {
		t.Helper()
		resp, err := http.Post(hs.URL+ControlPath, "text/plain", strings.NewReader(cmd))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r ControlResult
		if resp.StatusCode == http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&r)
		}
		return resp.StatusCode, r
	}
	mute := token.Command{Server: "sfu-a", Op: token.OpState, GuildID: 1, ChannelID: 2, UserID: 7, Mute: true}
	sign := func(k ed25519.PrivateKey, c token.Command, at time.Time) string {
		s, err := token.SignCommand(k, c, at)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	forged := sign(other, mute, now)
	expired := sign(key, mute, now.Add(-token.CommandTTL))
	misdirected := mute
	misdirected.Server = "sfu-b"
	for name, cmd := range map[string]string{"forged": forged, "expired": expired, "other server": sign(key, misdirected, now), "garbage": "cc1.x.y"} {
		if code, _ := post(cmd); code == http.StatusOK {
			t.Fatalf("%s command answered 200", name)
		}
		if p.mute.Load() {
			t.Fatalf("%s command muted the participant", name)
		}
	}
	good := sign(key, mute, now)
	if code, r := post(good); code != http.StatusOK || !r.Applied || !p.mute.Load() {
		t.Fatalf("signed mute: %d %+v, muted %v; want 200 applied, muted", code, r, p.mute.Load())
	}
	p.mute.Store(false)
	if code, _ := post(good); code != http.StatusUnauthorized || p.mute.Load() {
		t.Fatalf("replayed mute: %d, muted %v; want 401, not muted", code, p.mute.Load())
	}
	// A command overtaken by a later one changes nothing.
	unmute := mute
	unmute.Mute = false
	if code, r := post(sign(key, unmute, now.Add(time.Second))); code != http.StatusOK || !r.Applied || p.mute.Load() {
		t.Fatalf("unmute: %d %+v muted %v", code, r, p.mute.Load())
	}
	if code, r := post(sign(key, mute, now.Add(500*time.Millisecond))); code != http.StatusOK || r.Applied || p.mute.Load() {
		t.Fatalf("an older mute after the unmute: %d %+v muted %v; want 200 not applied, not muted", code, r, p.mute.Load())
	}

	// A user muted while not in the call starts muted on a token signed
	// before the mute, and a token signed after an unmute wins over it.
	clock = now.Add(2 * time.Second)
	if code, r := post(sign(key, token.Command{Server: "sfu-a", Op: token.OpState, GuildID: 1, ChannelID: 2, UserID: 8, Mute: true, Deaf: true}, clock)); code != http.StatusOK || r.Applied {
		t.Fatalf("mute of an absent user: %d %+v; want 200 not applied", code, r)
	}
	before := token.Claims{GuildID: 1, ChannelID: 2, UserID: 8, Expires: now.Add(token.TTL).UnixMilli()}
	if m, d := srv.joinVoiceState(before); !m || !d {
		t.Fatalf("join on a token signed before the mute: mute %v deaf %v, want both", m, d)
	}
	after := token.Claims{GuildID: 1, ChannelID: 2, UserID: 8, Expires: clock.Add(time.Second + token.TTL).UnixMilli()}
	if m, d := srv.joinVoiceState(after); m || d {
		t.Fatalf("join on a token signed after the mute, carrying no mute: mute %v deaf %v, want the token's", m, d)
	}
	fresh := token.Claims{GuildID: 1, ChannelID: 2, UserID: snowflake.ID(9), Mute: true, Expires: clock.Add(token.TTL).UnixMilli()}
	if m, _ := srv.joinVoiceState(fresh); !m {
		t.Fatal("a token carrying a mute joined unmuted")
	}
}
