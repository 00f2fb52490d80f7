package controller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func TestICEOf(t *testing.T) {
	vr := func(a map[string]string) *concordv1.VoiceRegion {
		return &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
	}
	s, err := iceOf(vr(nil))
	if err != nil || s.env() != nil {
		t.Fatalf("no annotations: %+v %v, want no environment", s, err)
	}
	s, err = iceOf(vr(map[string]string{AnnotationICEServers: "stun:a:3478"}))
	if err != nil || len(s.env()) != 1 {
		t.Fatalf("STUN only: %+v %v, want the servers alone", s.env(), err)
	}
	for name, a := range map[string]map[string]string{
		"http URL":           {AnnotationICEServers: "http://a"},
		"secret, no servers": {AnnotationICESecret: "coturn"},
		"bad ttl":            {AnnotationICEServers: "turn:a", AnnotationICECredentialTTL: "soon"},
		"negative ttl":       {AnnotationICEServers: "turn:a", AnnotationICECredentialTTL: "-1h"},
	} {
		if _, err := iceOf(vr(a)); err == nil || !strings.Contains(err.Error(), "voice.concord.dev/") {
			t.Errorf("%s: %v, want an error naming the annotation", name, err)
		}
	}
}

func TestICEOfSpec(t *testing.T) {
	ref := func(k string) *concordv1.SecretKeyReference {
		return &concordv1.SecretKeyReference{Name: "coturn", Key: k}
	}
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationICEServers: "stun:ignored:3478"}},
		Spec: concordv1.VoiceRegionSpec{ICE: &concordv1.VoiceICE{
			Servers:      []string{"turn:t:3478?transport=udp", "stun:t:3478"},
			SharedSecret: ref("auth"), CredentialTTL: &metav1.Duration{Duration: 90 * time.Minute},
		}},
	}
	s, err := iceOf(vr)
	if err != nil {
		t.Fatal(err)
	}
	env := s.env()
	if len(env) != 3 || env[0].Value != "turn:t:3478?transport=udp,stun:t:3478" {
		t.Fatalf("env %+v: want servers, secret and TTL, the spec winning over the annotation", env)
	}
	sec := env[1].ValueFrom.SecretKeyRef
	if env[1].Name != envICESecret || sec.Name != "coturn" || sec.Key != "auth" || sec.Optional != nil {
		t.Fatalf("secret env %+v: want a required reference to coturn/auth", env[1])
	}
	if d, err := time.ParseDuration(env[2].Value); err != nil || d != 90*time.Minute {
		t.Fatalf("TTL %q: want 90m", env[2].Value)
	}
	for name, ice := range map[string]*concordv1.VoiceICE{
		"no servers":          {},
		"http URL":            {Servers: []string{"http://a"}},
		"turn, no credential": {Servers: []string{"turn:a"}},
		"username alone":      {Servers: []string{"turn:a"}, Username: ref("u")},
		"ttl, no secret":      {Servers: []string{"turn:a"}, Username: ref("u"), Credential: ref("p"), CredentialTTL: &metav1.Duration{Duration: time.Hour}},
		"zero ttl":            {Servers: []string{"turn:a"}, SharedSecret: ref("s"), CredentialTTL: &metav1.Duration{}},
		"empty key":           {Servers: []string{"turn:a"}, SharedSecret: &concordv1.SecretKeyReference{Name: "x"}},
	} {
		if _, err := iceOf(&concordv1.VoiceRegion{Spec: concordv1.VoiceRegionSpec{ICE: ice}}); err == nil || !strings.Contains(err.Error(), "spec.ice") {
			t.Errorf("%s: %v, want an error naming spec.ice", name, err)
		}
	}
}
