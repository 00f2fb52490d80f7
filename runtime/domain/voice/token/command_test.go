package token

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCommandSignVerify(t *testing.T) {
	key, _ := GenerateKey()
	other, _ := GenerateKey()
	v := Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	now := time.Unix(1_800_000_000, 0)
	want := Command{Server: "sfu-a", Op: OpState, GuildID: 1, ChannelID: 2, UserID: 3, Mute: true}
	cmd, err := SignCommand(key, want, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.VerifyCommand(cmd, now.Add(CommandTTL-time.Millisecond))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if got.Server != want.Server || got.Op != want.Op || got.UserID != 3 || !got.Mute || got.Deaf || got.Nonce == "" || !got.IssuedAt().Equal(now) {
		t.Fatalf("verified %+v, want %+v issued at %v", got, want, now)
	}
	if _, err := v.VerifyCommand(cmd, now.Add(CommandTTL)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	forged, _ := SignCommand(other, want, now)
	if _, err := v.VerifyCommand(forged, now); !errors.Is(err, ErrSignature) {
		t.Fatalf("signed by another key: %v, want ErrSignature", err)
	}
	// A command and an admission token never stand for each other, though
	// one key signs both.
	tok, _ := Sign(key, claims(), now)
	if _, err := v.VerifyCommand(tok, now); !errors.Is(err, ErrMalformed) {
		t.Fatalf("admission token as a command: %v, want ErrMalformed", err)
	}
	if _, err := v.Verify(cmd, now); !errors.Is(err, ErrMalformed) {
		t.Fatalf("command as an admission token: %v, want ErrMalformed", err)
	}
	// Tampering with the body breaks the signature.
	parts := strings.Split(cmd, ".")
	bad := parts[0] + "." + parts[1][:len(parts[1])-2] + "AA." + parts[2]
	if _, err := v.VerifyCommand(bad, now); err == nil {
		t.Fatal("tampered command verified")
	}
	unknownOp := want
	unknownOp.Op = "ban"
	c2, _ := SignCommand(key, unknownOp, now)
	if _, err := v.VerifyCommand(c2, now); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown op: %v, want ErrMalformed", err)
	}
}

// TestRosterAndSelfCommands: a roster request names a guild and nothing
// else; a self-state command names its user; unknown ops are refused.
func TestRosterAndSelfCommands(t *testing.T) {
	key, _ := GenerateKey()
	v := Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	now := time.Now()
	for _, tc := range []struct {
		c  Command
		ok bool
	}{
		{Command{Server: "s", Op: OpRoster, GuildID: 1}, true},
		{Command{Server: "s", Op: OpRoster, GuildID: 1, UserID: 3}, false},
		{Command{Server: "s", Op: OpRoster}, false},
		{Command{Server: "s", Op: OpSelf, GuildID: 1, ChannelID: 2, UserID: 3, SelfMute: true}, true},
		{Command{Server: "s", Op: OpSelf, GuildID: 1, ChannelID: 2}, false},
		{Command{Server: "s", Op: "list-everything", GuildID: 1, ChannelID: 2, UserID: 3}, false},
	} {
		raw, err := SignCommand(key, tc.c, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.VerifyCommand(raw, now)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: err %v, want ok %v", tc.c, err, tc.ok)
		}
		if err == nil && got.SelfMute != tc.c.SelfMute {
			t.Errorf("%+v: self mute lost: %+v", tc.c, got)
		}
	}
}

func FuzzVerifyCommand(f *testing.F) {
	key, _ := GenerateKey()
	v := Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	now := time.Unix(1_800_000_000, 0)
	cmd, _ := SignCommand(key, Command{Server: "s", Op: OpDisconnect, GuildID: 1, ChannelID: 2, UserID: 3}, now)
	f.Add(cmd)
	f.Add("cc1..")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := v.VerifyCommand(s, now)
		if err == nil && (c.Server == "" || c.GuildID == 0 || (c.Op != OpRoster && c.UserID == 0)) {
			t.Fatalf("incomplete command verified: %+v", c)
		}
	})
}
