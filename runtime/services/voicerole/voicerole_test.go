package voicerole

import (
	"crypto/ed25519"
	"testing"

	"github.com/concord-chat/concord/runtime/config"
)

// TestKeys: the dev key is created once and kept; serve processes sharing
// a server key derive the same key; the SFU trusts the signer's public half
// unless told otherwise.
func TestKeys(t *testing.T) {
	c := config.Config{DataDir: t.TempDir()}
	k1, err := SigningKey(c, true)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := SigningKey(c, true)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("second start got another dev key (%v)", err)
	}
	s := config.Config{DataDir: t.TempDir(), ServerKey: "a cluster's shared server key of 32+ bytes"}
	g, _ := SigningKey(s, false)
	s.DataDir = t.TempDir()
	v, err := TrustedKeys(s, false)
	if err != nil || len(v) != 1 || !v[0].Equal(g.Public().(ed25519.PublicKey)) {
		t.Fatalf("a voice node does not trust the guild node's key: %v", err)
	}
	if g.Equal(k1) {
		t.Fatal("serve's derived key equals the dev key")
	}
	s.Voice.TrustedKeys = []string{"zz"}
	if _, err := TrustedKeys(s, false); err == nil {
		t.Fatal("a malformed trusted key was accepted")
	}
}

func TestSettings(t *testing.T) {
	v, err := settings(config.Config{Node: "n1", Voice: config.Voice{Listen: "0.0.0.0:8443", TLS: "devca"}})
	if err != nil {
		t.Fatal(err)
	}
	if v.UDP != "0.0.0.0:0" || v.PublicHost != "127.0.0.1" || v.PublicIP != "127.0.0.1" || v.Region != "local" || v.ID != "n1" || v.TLS != "devca" {
		t.Fatalf("dev defaults: %+v", v)
	}
	v, err = settings(config.Config{Node: "n1", Voice: config.Voice{PublicHost: "voice.example"}})
	if err != nil || v.TLS != "off" || v.PublicIP != "" {
		t.Fatalf("serve defaults: %+v, %v", v, err)
	}
	if _, err := settings(config.Config{Voice: config.Voice{TLS: "maybe"}}); err == nil {
		t.Fatal("--voice-tls=maybe accepted")
	}
}
