package turncred

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"testing"
	"time"
)

// TestMint: the username carries the expiry and the user, the credential
// is the HMAC-SHA1 of the username under the secret, base64 — checked
// against an HMAC computed here, and against the known RFC 2202 vector
// (key "Jefe", "what do ya want for nothing?").
func TestMint(t *testing.T) {
	exp := time.Unix(1_800_000_000, 0)
	u, c := Mint("s3cret", "1234", exp)
	if u != "1800000000:1234" {
		t.Fatalf("username %q", u)
	}
	m := hmac.New(sha1.New, []byte("s3cret"))
	m.Write([]byte(u))
	if want := base64.StdEncoding.EncodeToString(m.Sum(nil)); c != want {
		t.Fatalf("credential %q, want %q", c, want)
	}
	// RFC 2202 test case 2: effcdf6ae5eb2fa2d27416d5f184df9c259a7c79.
	if got := Credential("Jefe", "what do ya want for nothing?"); got != "7/zfauXrL6LSdBbV8YTfnCWafHk=" {
		t.Fatalf("RFC 2202 vector: %q", got)
	}
	if e, err := Expiry(u); err != nil || !e.Equal(exp) {
		t.Fatalf("expiry %v %v", e, err)
	}
	if _, err := Expiry("nouser"); err == nil {
		t.Fatal("expiry of a username without one")
	}
}
