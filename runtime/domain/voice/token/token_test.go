package token

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

func claims() Claims {
	return Claims{UserID: 1, GuildID: 2, ChannelID: 3, Server: "sfu-a", SessionID: "s1"}
}

func TestSignVerify(t *testing.T) {
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	tok, err := Sign(key, claims(), now)
	if err != nil {
		t.Fatal(err)
	}
	v := Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	c, err := v.Verify(tok, now.Add(59*time.Second))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	want := claims()
	if c.UserID != want.UserID || c.GuildID != want.GuildID || c.ChannelID != want.ChannelID || c.Server != want.Server || c.SessionID != want.SessionID {
		t.Fatalf("claims = %+v", c)
	}
	if c.ExpiresAt() != now.Add(TTL) || c.Nonce == "" {
		t.Fatalf("expiry %v nonce %q", c.ExpiresAt(), c.Nonce)
	}
	if _, err := v.Verify(tok, now.Add(TTL)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	if _, err := v.VerifySignature(tok); err != nil {
		t.Fatalf("signature of an expired token: %v", err)
	}
	tok2, _ := Sign(key, claims(), now)
	if tok2 == tok {
		t.Fatal("two tokens for the same claims are identical: no nonce")
	}
}

func TestVerifyRejects(t *testing.T) {
	key, _ := GenerateKey()
	other, _ := GenerateKey()
	now := time.Unix(1_800_000_000, 0)
	tok, _ := Sign(key, claims(), now)
	forged, _ := Sign(other, claims(), now)
	v := Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	// Change the user id inside the claims but keep the signature.
	parts := strings.Split(tok, ".")
	tampered := parts[0] + "." + parts[1][:len(parts[1])-2] + "xx" + "." + parts[2]
	for name, tc := range map[string]struct {
		tok  string
		want error
	}{
		"forged":    {forged, ErrSignature},
		"tampered":  {tampered, ErrSignature},
		"empty":     {"", ErrMalformed},
		"garbage":   {"cv1.!!!.###", ErrMalformed},
		"no prefix": {strings.TrimPrefix(tok, "cv1."), ErrMalformed},
		"huge":      {"cv1." + strings.Repeat("a", MaxLen), ErrMalformed},
	} {
		if _, err := v.Verify(tc.tok, now); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := (Verifier{}).Verify(tok, now); !errors.Is(err, ErrSignature) {
		t.Errorf("no keys: %v", err)
	}
}

func TestParseKeys(t *testing.T) {
	key, _ := GenerateKey()
	seed := FormatPrivateKey(key)
	k2, err := ParsePrivateKey(seed)
	if err != nil || !k2.Equal(key) {
		t.Fatalf("ParsePrivateKey: %v", err)
	}
	pub, err := ParsePublicKey(FormatPublicKey(key.Public().(ed25519.PublicKey)))
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	if _, err := ParsePrivateKey("zz"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad seed: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	key, _ := GenerateKey()
	tok, _ := Sign(key, claims(), time.Unix(1_800_000_000, 0))
	f.Add(tok)
	f.Add("cv1.e30.AAAA")
	v := Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := v.VerifySignature(s)
		if err == nil && s != tok {
			// Ed25519 signatures are not malleable: only the signed token verifies.
			t.Fatalf("unexpected valid token %q: %+v", s, c)
		}
	})
}
