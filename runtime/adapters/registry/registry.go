// Package registry is Concord's directory of live nodes: which processes
// run which roles at which addresses, which guilds are pinned to which
// guild node, which nodes are draining, plus a small key-value space for
// cluster-wide settings.
//
// Guild placement is a consistent-hash Ring over the live, non-draining
// guild nodes, with pins applied first. Gateways and API nodes keep a
// LocalRing: a watched local copy that answers Owner without a network
// round trip and reports every change so that sessions of guilds that
// moved can be resubscribed.
//
// The port is Registry; registry/etcd implements it over etcd leases and
// watches, and registry/registrytest is its conformance suite.
package registry

import (
	"context"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Well-known roles a node registers under.
const (
	RoleGateway = "gateway"
	RoleGuild   = "guild"
	RoleAPI     = "api"
	// RoleData is the data service (runtime/services/dataservice): the message
	// reads and writes of the channels a data ring gives the node.
	RoleData = "data"
)

// Node describes one registered process.
type Node struct {
	// Name is unique in the cluster (the pod name in Kubernetes).
	Name string `json:"name"`
	// Roles lists what the node runs, e.g. "gateway", "guild".
	Roles []string `json:"roles"`
	// Addr is the node's gRPC address (host:port).
	Addr string `json:"addr"`
	// HTTPAddr is the node's HTTP address (host:port), if it serves one.
	HTTPAddr string `json:"http_addr,omitempty"`
	// Zone is the failure domain, e.g. a Kubernetes topology zone.
	Zone string `json:"zone,omitempty"`
	// Labels are free-form attributes.
	Labels map[string]string `json:"labels,omitempty"`
	// Draining is set by SetDraining; it is ignored by Register. A
	// draining node keeps its entry but owns no guilds on the ring.
	Draining bool `json:"-"`
}

// LabelDedicated marks a node that takes no share of its role's ring:
// it owns only the keys pinned to it (a dedicated guild node of a
// GuildPlacement). The value says what it is dedicated to, for people.
const LabelDedicated = "concord.dev/dedicated"

// OnRing reports whether n is a member of its role's consistent-hash
// ring: live nodes that are neither draining nor dedicated. Pins apply to
// every live node. Everything that computes placement (LocalRing, the
// operator) must use it, so that all agree on the owners.
func OnRing(n Node) bool { return !n.Draining && n.Labels[LabelDedicated] == "" }

// HasRole reports whether n runs role.
func (n Node) HasRole(role string) bool { return slices.Contains(n.Roles, role) }

// Snapshot is the registry's view for one role at one revision.
type Snapshot struct {
	// Revision increases with every change of the registry.
	Revision int64
	// Nodes are the live nodes with the role, sorted by Name.
	Nodes []Node
	// Pins maps guild ids to the node they are pinned to (GuildPlacement).
	// A pin names a node that may not be live.
	Pins map[snowflake.ID]string
}

// Lifetime says how long a key written with Put lives.
type Lifetime int

const (
	// Persistent keys live until deleted.
	Persistent Lifetime = iota
	// WhileAlive keys are bound to the writing Registry's lease: they
	// disappear within the lease TTL after the process dies or calls
	// Close, as node entries do. Use it for load reports.
	WhileAlive
)

// Registry is the cluster directory.
//
// Liveness: Register binds the node's entry to a lease that the Registry
// keeps alive; a process that dies (or calls Close without deregistering)
// disappears from every Watch within the lease TTL. Implementations renew
// the lease and re-create the entry after a lost connection.
//
// Ordering: each Watch channel delivers snapshots in revision order; a
// slow reader may miss intermediate snapshots but always receives the
// latest one (snapshots are conflated, never queued without bound).
type Registry interface {
	// Register publishes n under the Registry's lease until the returned
	// Registration is closed or the Registry is closed. Registering a
	// name that is already live fails with ErrExists.
	Register(ctx context.Context, n Node) (Registration, error)
	// Watch delivers the current Snapshot for role at once and then a new
	// one after every change to the nodes with that role, their draining
	// flags or the pins. The channel is closed when ctx ends or the
	// Registry is closed.
	Watch(ctx context.Context, role string) (<-chan Snapshot, error)
	// Pin places guildID on node ahead of the ring until Unpin. The pin
	// outlives the node: while node is not live, the ring decides.
	Pin(ctx context.Context, guildID snowflake.ID, node string) error
	// Unpin removes guildID's pin; removing a missing pin is not an error.
	Unpin(ctx context.Context, guildID snowflake.ID) error
	// SetDraining marks a live node as draining or not. The flag lives as
	// long as the node's entry. A node that is not live gives ErrNotFound.
	SetDraining(ctx context.Context, node string, draining bool) error
	// Put writes a small value (at most a few KB) under key.
	Put(ctx context.Context, key string, value []byte, lifetime Lifetime) error
	// Get reads key; a missing key gives ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// List returns every key starting with prefix and its value.
	List(ctx context.Context, prefix string) (map[string][]byte, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close stops renewing the lease and releases the connection. Entries
	// not deregistered expire within the TTL, as if the process had died.
	Close() error
}

// Registration is one node entry published by Register.
type Registration interface {
	// Close removes the entry at once (a graceful leave).
	Close(ctx context.Context) error
}
