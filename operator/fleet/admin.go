package fleet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/concord-chat/concord/runtime/adminapi"
)

// DrainRequest asks a gateway pod to hand its sessions to a successor.
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

// Drainer drains pods through their admin endpoint. Drain is idempotent:
// calling it again on a draining pod returns its current state.
type Drainer interface {
	// Drain starts (or continues) a pod's drain.
	Drain(ctx context.Context, pod *corev1.Pod, req DrainRequest) (DrainState, error)
	// State reports a pod's sessions and drain progress without changing it.
	State(ctx context.Context, pod *corev1.Pod) (DrainState, error)
}

// GuildSample is one guild's load as its guild node reports it. The
// runtime serves the same type (runtime/adminapi), which imports nothing
// heavier than the standard library.
type GuildSample = adminapi.GuildSample

// GuildStats reports every guild of a cluster, as the guild nodes publish it.
type GuildStats interface {
	GuildStats(ctx context.Context, cluster ClusterKey) ([]GuildSample, error)
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

// VoiceLoads reports an SFU pod's load.
type VoiceLoads interface {
	VoiceLoad(ctx context.Context, pod *corev1.Pod) (VoiceLoad, error)
}
