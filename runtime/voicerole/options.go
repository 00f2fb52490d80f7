package voicerole

import (
	"fmt"
	"time"
)

// Environment variables of the voice role's settings that have no flag
// yet: each is read when the role is built.
const (
	// EnvICESecret is the TURN servers' shared secret (coturn's
	// static-auth-secret): with it every voice session is handed its own
	// time-limited TURN credential instead of --voice-ice-username and
	// --voice-ice-credential.
	EnvICESecret = "CONCORD_VOICE_ICE_SECRET"
	// EnvICECredentialTTL is how long a minted TURN credential is valid
	// (a Go duration; default 12h).
	EnvICECredentialTTL = "CONCORD_VOICE_ICE_CREDENTIAL_TTL"
)

// Options are the voice role's settings read from the environment.
type Options struct {
	// ICESecret is EnvICESecret.
	ICESecret string
	// ICECredentialTTL is EnvICECredentialTTL; zero takes the default.
	ICECredentialTTL time.Duration
}

// OptionsFromEnv reads Options through getenv (os.Getenv).
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{ICESecret: getenv(EnvICESecret)}
	if v := getenv(EnvICECredentialTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("voice: %s=%q: want a positive duration such as 12h", EnvICECredentialTTL, v)
		}
		o.ICECredentialTTL = d
	}
	return o, nil
}
