package controller

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// A region's ICE/TURN settings, handed to its SFU pods as the
// CONCORD_VOICE_ICE_* environment the voice role reads, and by the SFU to
// browsers in voice Ready (ice_servers). They are annotations of the
// VoiceRegion until its spec carries them; credentials never appear in
// the object: they stay in a Secret the pods read.
const (
	// AnnotationICEServers lists STUN/TURN URLs, comma-separated
	// (turn:turn.example:3478?transport=udp,stun:turn.example:3478).
	AnnotationICEServers = "voice.concord.dev/ice-servers"
	// AnnotationICESecret names a Secret of the region's namespace whose
	// keys, each optional, are "username" and "credential" (one static
	// TURN credential for every client) and "secret" (coturn's
	// static-auth-secret: each voice session gets its own time-limited
	// credential minted from it).
	AnnotationICESecret = "voice.concord.dev/ice-secret"
	// AnnotationICECredentialTTL is how long a minted credential lasts
	// (a Go duration such as 12h).
	AnnotationICECredentialTTL = "voice.concord.dev/ice-credential-ttl"
)

// Keys of the Secret AnnotationICESecret names.
const (
	iceSecretUsername   = "username"
	iceSecretCredential = "credential"
	iceSecretSecret     = "secret"
)

// iceSettings are a region's ICE/TURN settings.
type iceSettings struct {
	servers []string
	secret  string // the Secret's name
	ttl     string
}

// iceOf reads and checks vr's ICE/TURN settings; an error says which
// annotation is wrong.
func iceOf(vr *concordv1.VoiceRegion) (iceSettings, error) {
	a := vr.Annotations
	var s iceSettings
	for _, u := range strings.Split(a[AnnotationICEServers], ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		scheme, _, ok := strings.Cut(u, ":")
		if !ok || (scheme != "stun" && scheme != "stuns" && scheme != "turn" && scheme != "turns") {
			return s, fmt.Errorf("annotation %s: %q is not a stun:, stuns:, turn: or turns: URL", AnnotationICEServers, u)
		}
		s.servers = append(s.servers, u)
	}
	s.secret = strings.TrimSpace(a[AnnotationICESecret])
	if s.secret != "" && len(s.servers) == 0 {
		return s, fmt.Errorf("annotation %s names TURN credentials but %s lists no server", AnnotationICESecret, AnnotationICEServers)
	}
	if s.ttl = strings.TrimSpace(a[AnnotationICECredentialTTL]); s.ttl != "" {
		if d, err := time.ParseDuration(s.ttl); err != nil || d <= 0 {
			return s, fmt.Errorf("annotation %s: %q is not a positive duration such as 12h", AnnotationICECredentialTTL, s.ttl)
		}
	}
	return s, nil
}

// env is the SFU pods' environment for s: the servers, and each
// credential from the Secret (optional keys, so a Secret with only a
// static credential or only a shared secret works).
func (s iceSettings) env() []corev1.EnvVar {
	if len(s.servers) == 0 {
		return nil
	}
	out := []corev1.EnvVar{env("CONCORD_VOICE_ICE_SERVERS", strings.Join(s.servers, ","))}
	if s.secret != "" {
		ref := func(name, key string) corev1.EnvVar {
			return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.secret}, Key: key, Optional: ptrTo(true)}}}
		}
		out = append(out,
			ref("CONCORD_VOICE_ICE_USERNAME", iceSecretUsername),
			ref("CONCORD_VOICE_ICE_CREDENTIAL", iceSecretCredential),
			ref("CONCORD_VOICE_ICE_SECRET", iceSecretSecret))
	}
	if s.ttl != "" {
		out = append(out, env("CONCORD_VOICE_ICE_CREDENTIAL_TTL", s.ttl))
	}
	return out
}
