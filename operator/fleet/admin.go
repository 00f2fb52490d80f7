package fleet

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/concord-chat/concord/runtime/base/adminapi"
)

// DrainRequest asks a pod to drain (runtime/base/adminapi).
type DrainRequest = adminapi.DrainRequest

// DrainState is what a pod reports about its drain (runtime/base/adminapi).
type DrainState = adminapi.DrainState

// Drainer drains pods through their admin endpoint. Drain is idempotent:
// calling it again on a draining pod returns its current state.
type Drainer interface {
	// Drain starts (or continues) a pod's drain.
	Drain(ctx context.Context, pod *corev1.Pod, req DrainRequest) (DrainState, error)
	// State reports a pod's sessions and drain progress without changing it.
	State(ctx context.Context, pod *corev1.Pod) (DrainState, error)
}

// GuildSample is one guild's load as its guild node reports it. The
// runtime serves the same type (runtime/base/adminapi), which imports nothing
// heavier than the standard library.
type GuildSample = adminapi.GuildSample

// GuildStats reports every guild of a cluster, as the guild nodes publish it.
type GuildStats interface {
	GuildStats(ctx context.Context, cluster ClusterKey) ([]GuildSample, error)
}

// VoiceLoad is one SFU pod's load (runtime/base/adminapi).
type VoiceLoad = adminapi.VoiceLoad

// VoiceLoads reports an SFU pod's load.
type VoiceLoads interface {
	VoiceLoad(ctx context.Context, pod *corev1.Pod) (VoiceLoad, error)
}
