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

// GatewayViewers is one live gateway's viewers as the stream directory
// holds them: the sum of its fresh per-stream reports.
type GatewayViewers struct {
	// Gateway is the gateway's registry node id (its pod name).
	Gateway string
	// Viewers is its viewers over every stream.
	Viewers int64
	// Streams is how many streams it reported viewers of.
	Streams int
}

// LiveViewers reports every live gateway of a cluster with viewers, as the
// gateways publish them to the stream directory (the registry keys
// live/viewers/<stream>/<gateway>, rewritten every 5 s, counted for 15 s).
// An error means the signal is missing (the registry could not be read),
// which is not the same as no viewers (an empty list).
type LiveViewers interface {
	LiveViewers(ctx context.Context, cluster ClusterKey) ([]GatewayViewers, error)
}
