package bots_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/bots"
)

func signed(t *testing.T, priv ed25519.PrivateKey, ts time.Time, body string) (sig, stamp string) {
	t.Helper()
	stamp = strconv.FormatInt(ts.Unix(), 10)
	return hex.EncodeToString(ed25519.Sign(priv, []byte(stamp+body))), stamp
}

func TestVerifyRequest(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Now()
	body := `{"type":2,"id":"1"}`
	good, stamp := signed(t, priv, now, body)
	forged, _ := signed(t, otherPriv, now, body)
	staleSig, staleStamp := signed(t, priv, now.Add(-10*time.Minute), body)

	for _, tc := range []struct {
		name, sig, stamp, body string
		ok                     bool
	}{
		{"valid", good, stamp, body, true},
		{"forged", forged, stamp, body, false},
		{"tampered body", good, stamp, `{"type":2,"id":"2"}`, false},
		{"other timestamp", good, strconv.FormatInt(now.Unix()+1, 10), body, false},
		{"stale", staleSig, staleStamp, body, false},
		{"missing", "", "", body, false},
		{"not hex", "zz" + good[2:], stamp, body, false},
		{"short", good[:10], stamp, body, false},
		{"bad timestamp", good, "yesterday", body, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/interactions", bytes.NewBufferString(tc.body))
			r.Header.Set(bots.HeaderSignature, tc.sig)
			r.Header.Set(bots.HeaderTimestamp, tc.stamp)
			got, err := bots.VerifyRequest(pub, r)
			if tc.ok {
				if err != nil || string(got) != tc.body {
					t.Fatalf("VerifyRequest = %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, bots.ErrBadSignature) {
				t.Fatalf("VerifyRequest = %v, want ErrBadSignature", err)
			}
		})
	}
	// The verifier's clock decides staleness.
	r := httptest.NewRequest("POST", "/", bytes.NewBufferString(body))
	r.Header.Set(bots.HeaderSignature, staleSig)
	r.Header.Set(bots.HeaderTimestamp, staleStamp)
	v := bots.Verifier{Key: pub, Now: func() time.Time { return now.Add(-10 * time.Minute) }}
	if _, err := v.Verify(r); err != nil {
		t.Fatalf("fresh for the verifier's clock: %v", err)
	}
}
