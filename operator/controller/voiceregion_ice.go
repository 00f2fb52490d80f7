package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// A region's ICE/TURN settings reach its SFU pods as the
// CONCORD_VOICE_ICE_* environment the voice role reads, and the SFU hands
// them to browsers in voice Ready (ice_servers). They are the spec's ice
// field; the annotations below are the deprecated form they had before
// the spec carried them, still honoured when spec.ice is unset.
// Credentials never appear in the object or the pod spec: the pods read
// them from Secrets.
const (
	// AnnotationICEServers lists STUN/TURN URLs, comma-separated
	// (turn:turn.example:3478?transport=udp,stun:turn.example:3478).
	// Deprecated: use spec.ice.servers.
	AnnotationICEServers = "voice.concord.dev/ice-servers"
	// AnnotationICESecret names a Secret of the region's namespace whose
	// keys, each optional, are "username" and "credential" (one static
	// TURN credential for every client) and "secret" (coturn's
	// static-auth-secret: each voice session gets its own time-limited
	// credential minted from it).
	// Deprecated: use spec.ice.sharedSecret, or spec.ice.username and
	// spec.ice.credential.
	AnnotationICESecret = "voice.concord.dev/ice-secret"
	// AnnotationICECredentialTTL is how long a minted credential lasts
	// (a Go duration such as 12h).
	// Deprecated: use spec.ice.credentialTTL.
	AnnotationICECredentialTTL = "voice.concord.dev/ice-credential-ttl"
)

// Keys of the Secret AnnotationICESecret names.
const (
	iceSecretUsername   = "username"
	iceSecretCredential = "credential"
	iceSecretSecret     = "secret"
)

// The SFU's environment for each credential.
const (
	envICEUsername   = "CONCORD_VOICE_ICE_USERNAME"
	envICECredential = "CONCORD_VOICE_ICE_CREDENTIAL"
	envICESecret     = "CONCORD_VOICE_ICE_SECRET"
)

// iceSettings are a region's ICE/TURN settings, from its spec or its
// deprecated annotations.
type iceSettings struct {
	servers []string
	ttl     string
	// refs maps each credential's environment variable to the Secret key
	// holding it.
	refs map[string]concordv1.SecretKeyReference
	// optional is true for the annotations' Secret, whose keys may be
	// missing; the spec's references are checked before any pod is made.
	optional bool
}

// iceOf reads and checks vr's ICE/TURN settings; an error names the field
// or annotation that is wrong. The CRD's schema already refuses most bad
// input to spec.ice; the checks here cover objects it did not validate
// and the annotations it never sees.
func iceOf(vr *concordv1.VoiceRegion) (iceSettings, error) {
	if ice := vr.Spec.ICE; ice != nil {
		return iceOfSpec(ice)
	}
	return iceOfAnnotations(vr.Annotations)
}

func iceOfSpec(ice *concordv1.VoiceICE) (iceSettings, error) {
	s := iceSettings{refs: map[string]concordv1.SecretKeyReference{}}
	turn := false
	for i, u := range ice.Servers {
		scheme, err := iceScheme(u)
		if err != nil {
			return s, fmt.Errorf("spec.ice.servers[%d]: %w", i, err)
		}
		turn = turn || strings.HasPrefix(scheme, "turn")
		s.servers = append(s.servers, u)
	}
	if len(s.servers) == 0 {
		return s, fmt.Errorf("spec.ice.servers lists no server")
	}
	for name, r := range map[string]*concordv1.SecretKeyReference{
		"sharedSecret": ice.SharedSecret, "username": ice.Username, "credential": ice.Credential,
	} {
		if r != nil && (r.Name == "" || r.Key == "") {
			return s, fmt.Errorf("spec.ice.%s needs a Secret name and key", name)
		}
	}
	if (ice.Username == nil) != (ice.Credential == nil) {
		return s, fmt.Errorf("spec.ice.username and spec.ice.credential go together")
	}
	if turn && ice.SharedSecret == nil && ice.Username == nil {
		return s, fmt.Errorf("a turn: or turns: server needs spec.ice.sharedSecret, or spec.ice.username and spec.ice.credential")
	}
	if ice.SharedSecret != nil {
		s.refs[envICESecret] = *ice.SharedSecret
	}
	if ice.Username != nil {
		s.refs[envICEUsername], s.refs[envICECredential] = *ice.Username, *ice.Credential
	}
	if ice.CredentialTTL != nil {
		if ice.SharedSecret == nil {
			return s, fmt.Errorf("spec.ice.credentialTTL applies to credentials minted from spec.ice.sharedSecret")
		}
		if ice.CredentialTTL.Duration <= 0 {
			return s, fmt.Errorf("spec.ice.credentialTTL %s is not positive", ice.CredentialTTL.Duration)
		}
		s.ttl = ice.CredentialTTL.Duration.String()
	}
	return s, nil
}

func iceOfAnnotations(a map[string]string) (iceSettings, error) {
	s := iceSettings{optional: true}
	for _, u := range strings.Split(a[AnnotationICEServers], ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		if _, err := iceScheme(u); err != nil {
			return s, fmt.Errorf("annotation %s: %w", AnnotationICEServers, err)
		}
		s.servers = append(s.servers, u)
	}
	if secret := strings.TrimSpace(a[AnnotationICESecret]); secret != "" {
		if len(s.servers) == 0 {
			return s, fmt.Errorf("annotation %s names TURN credentials but %s lists no server", AnnotationICESecret, AnnotationICEServers)
		}
		s.refs = map[string]concordv1.SecretKeyReference{
			envICEUsername:   {Name: secret, Key: iceSecretUsername},
			envICECredential: {Name: secret, Key: iceSecretCredential},
			envICESecret:     {Name: secret, Key: iceSecretSecret},
		}
	}
	if s.ttl = strings.TrimSpace(a[AnnotationICECredentialTTL]); s.ttl != "" {
		if d, err := time.ParseDuration(s.ttl); err != nil || d <= 0 {
			return s, fmt.Errorf("annotation %s: %q is not a positive duration such as 12h", AnnotationICECredentialTTL, s.ttl)
		}
	}
	return s, nil
}

// iceScheme returns u's scheme, or an error when u is not a STUN or TURN URL.
func iceScheme(u string) (string, error) {
	scheme, rest, ok := strings.Cut(u, ":")
	if !ok || rest == "" || (scheme != "stun" && scheme != "stuns" && scheme != "turn" && scheme != "turns") {
		return "", fmt.Errorf("%q is not a stun:, stuns:, turn: or turns: URL", u)
	}
	return scheme, nil
}

// errICESecretMissing marks a referenced Secret or key that does not exist.
var errICESecretMissing = errors.New("not found (or empty)")

// checkSecrets reads every Secret key the spec's settings reference and
// says which is missing: a pod referencing it would never start.
// Annotation settings reference optional keys and are not checked.
func (s iceSettings) checkSecrets(ctx context.Context, r client.Reader, namespace string) error {
	if s.optional || r == nil {
		return nil
	}
	read := map[string]*corev1.Secret{}
	for _, name := range []string{envICESecret, envICEUsername, envICECredential} {
		ref, ok := s.refs[name]
		if !ok {
			continue
		}
		sec, ok := read[ref.Name]
		if !ok {
			sec = &corev1.Secret{}
			if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("spec.ice: Secret %s/%s %w", namespace, ref.Name, errICESecretMissing)
				}
				return fmt.Errorf("spec.ice: read Secret %s/%s: %w", namespace, ref.Name, err)
			}
			read[ref.Name] = sec
		}
		if len(sec.Data[ref.Key]) == 0 && sec.StringData[ref.Key] == "" {
			return fmt.Errorf("spec.ice: Secret %s/%s key %q: %w", namespace, ref.Name, ref.Key, errICESecretMissing)
		}
	}
	return nil
}

// annotationICEHash on an SFU pod is the hash of the ICE settings it was
// made with. The settings reach the SFU as its environment, read once at
// start, so a pod whose hash is not the region's current one is rolled:
// drained (its calls move) and replaced.
const annotationICEHash = "voice.concord.dev/ice-hash"

// hash identifies s: the servers, the TTL and every credential's Secret
// reference (a rotated Secret under the same reference is the Secret's
// business; a new reference is a new setting).
func (s iceSettings) hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "servers=%q\nttl=%q\noptional=%v\n", s.servers, s.ttl, s.optional)
	for _, name := range []string{envICEUsername, envICECredential, envICESecret} {
		if ref, ok := s.refs[name]; ok {
			fmt.Fprintf(h, "%s=%q/%q\n", name, ref.Name, ref.Key)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// env is the SFU pods' environment for s: the servers and TTL as values,
// each credential as a reference to its Secret key.
func (s iceSettings) env() []corev1.EnvVar {
	if len(s.servers) == 0 {
		return nil
	}
	out := []corev1.EnvVar{env("CONCORD_VOICE_ICE_SERVERS", strings.Join(s.servers, ","))}
	for _, name := range []string{envICEUsername, envICECredential, envICESecret} {
		ref, ok := s.refs[name]
		if !ok {
			continue
		}
		sel := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}, Key: ref.Key}
		if s.optional {
			sel.Optional = ptrTo(true)
		}
		out = append(out, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sel}})
	}
	if s.ttl != "" {
		out = append(out, env("CONCORD_VOICE_ICE_CREDENTIAL_TTL", s.ttl))
	}
	return out
}
