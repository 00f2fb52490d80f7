package fleet

import "github.com/concord-chat/concord/runtime/domain/voice"

// Endpoints returns the endpoints (host:port) of the servers Pick may hand
// out now, as VOICE_SERVER_UPDATE carries them: the web client's
// Content-Security-Policy admits exactly these.
func (r *Registry) Endpoints() []string { return endpoints(r.live()) }

// Endpoints returns the endpoints of the in-process servers.
func (l *Local) Endpoints() []string { return endpoints(l.loads()) }

func endpoints(loads []voice.Load) []string {
	out := make([]string, 0, len(loads))
	for _, l := range loads {
		if l.Endpoint != "" {
			out = append(out, l.Endpoint)
		}
	}
	return out
}
