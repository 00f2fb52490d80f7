package fleet

import (
	"context"
	"errors"
)

// ErrNotFound is returned when the registry holds no such key.
var ErrNotFound = errors.New("fleet: not found")

// Registry is the operator's view of the runtime registry of one
// ConcordCluster. Every write is idempotent; callers retry on error.
// Writes are visible to the runtime through etcd watches, so a pin or relay
// list takes effect asynchronously: callers observe the effect (GuildOwner)
// rather than assume it.
type Registry interface {
	// MarkDraining records that a pod (gateway or SFU) is draining: the
	// runtime stops routing new sessions, identifies or calls to it.
	MarkDraining(ctx context.Context, role, pod string) error
	// ClearDraining forgets a pod's draining mark (after its deletion).
	ClearDraining(ctx context.Context, role, pod string) error
	// PinGuild asks the ring to run the guild's actor on node (a registry
	// node id). The current actor flushes and stops; the pinned node loads
	// the guild from the store; sessions resubscribe.
	PinGuild(ctx context.Context, guildID, node string) error
	// UnpinGuild removes a pin: the guild returns to its ring owner.
	UnpinGuild(ctx context.Context, guildID string) error
	// GuildOwner is the node currently running the guild's actor, or
	// ErrNotFound when no actor has the guild loaded.
	GuildOwner(ctx context.Context, guildID string) (string, error)
	// SetRelays publishes the relay endpoints a guild actor fans out through.
	// An empty list removes them.
	SetRelays(ctx context.Context, guildID string, endpoints []string) error
}

// RegistryProvider opens the registry of a cluster, identified by
// namespace/name and by the etcd endpoints and key prefix of its spec.
type RegistryProvider interface {
	Registry(ctx context.Context, cluster ClusterKey) (Registry, error)
}

// ClusterKey identifies a ConcordCluster and its registry.
type ClusterKey struct {
	// Namespace and Name of the ConcordCluster.
	Namespace, Name string
	// Endpoints are the etcd client URLs; Prefix the key prefix.
	Endpoints []string
	Prefix    string
}
