// Package adminapi holds the wire types of Concord's admin endpoints that
// both sides decode: the runtime's nodes serve them and the operator, its
// autoscaler and kubectl-concord read them. It imports only the standard
// library, so the runtime binary that serves the endpoints does not link
// the Kubernetes API types the operator's packages import.
package adminapi

import "time"

// LabelAdmin is the registry label in which a node publishes the
// host:port of its admin endpoints: api nodes ask the guild nodes for
// GET /admin/guilds there.
const LabelAdmin = "concord.dev/admin"

// GuildSample is one guild's load as GET /admin/guilds and
// GET /admin/guilds/{id} report it.
type GuildSample struct {
	// GuildID is the guild's snowflake.
	GuildID string `json:"guildID"`
	// Node is the registry node id running the guild's actor.
	Node string `json:"node"`
	// Pod is the pod name of that node; guild nodes leave it empty and
	// the operator fills it from the pod it asked.
	Pod string `json:"pod,omitempty"`
	// EventAgeP50 and EventAgeP99 are the time from an operation's entry
	// into the actor's queue to its dispatch, over the latest events of
	// the last minute, in nanoseconds.
	EventAgeP50 time.Duration `json:"eventAgeP50"`
	EventAgeP99 time.Duration `json:"eventAgeP99"`
	// QueueLength is the number of operations waiting in the actor's
	// mailbox.
	QueueLength int64 `json:"queueLength"`
	// Online is the number of gateway sessions subscribed to the guild.
	Online int64 `json:"online"`
	// Members is the guild's member count.
	Members int64 `json:"members"`
	// VoiceCalls is the number of the guild's voice channels with a call
	// in progress (someone in the channel).
	VoiceCalls int64 `json:"voiceCalls"`
}

// DrainRequest is the body of POST /admin/drain: a gateway pod hands its
// sessions to the successor; an SFU reads only the deadline (its calls
// move through their guilds).
type DrainRequest struct {
	// Successor is the name of the pod that takes the sessions over.
	Successor string `json:"successor"`
	// SuccessorAddress is host:port of the successor's session hand-off
	// endpoint (its admin address).
	SuccessorAddress string `json:"successorAddress"`
	// ReconnectJitter spreads the clients' op 7 reconnects.
	ReconnectJitter time.Duration `json:"reconnectJitter"`
	// Deadline after which the pod is deleted regardless.
	Deadline time.Time `json:"deadline"`
}

// DrainState is what a pod reports about its drain.
type DrainState struct {
	// Draining is true once the pod accepted the drain (stopped accepting
	// identifies / calls).
	Draining bool `json:"draining"`
	// Sessions still attached to the pod (gateways), or active calls (SFUs);
	// -1 when the pod accepted a drain without reporting a count.
	Sessions int64 `json:"sessions"`
	// Done is true when everything has been handed over.
	Done bool `json:"done"`
}

// VoiceLoad is one SFU pod's load.
type VoiceLoad struct {
	// ActiveCalls is the number of calls with at least one participant.
	ActiveCalls int64 `json:"activeCalls"`
	// Participants is the number of connected participants.
	Participants int64 `json:"participants"`
	// Endpoint is the voice gateway address the server gives clients.
	Endpoint string `json:"endpoint,omitempty"`
	// Draining is true once the server takes no new calls.
	Draining bool `json:"draining,omitempty"`
	// PacketsForwarded per second over the server's last report period.
	PacketsForwarded float64 `json:"packetsForwarded,omitempty"`
	// LossRatio is the share of speakers' packets that never reached the
	// server over its last report period; Jitter their mean interarrival
	// jitter; RTT the mean round trip its WebRTC listeners reported. The
	// guilds place no new calls on a server whose recent figures are poor
	// (docs/voice.md, "Placement on quality").
	LossRatio float64       `json:"lossRatio,omitempty"`
	Jitter    time.Duration `json:"jitter,omitempty"`
	RTT       time.Duration `json:"rtt,omitempty"`
	// At is when the server reported the load.
	At time.Time `json:"at"`
}

// Admin paths of the per-guild statistics: served by every process
// running the guild role for the guilds loaded in its actors (the
// operator asks every guild pod), and by an api node without the guild
// role for the whole cluster.
const (
	// GuildsPath answers 200 []GuildSample.
	GuildsPath = "/admin/guilds"
	// GuildPath answers 200 GuildSample, or 404 with Discord's Unknown
	// Guild error (code 10004) when the guild is not loaded.
	GuildPath = "/admin/guilds/{id}"
)
