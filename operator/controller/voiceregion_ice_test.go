package controller

import (
	"strings"
	"testing"

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
