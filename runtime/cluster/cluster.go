// Package cluster is `concord serve --roles=...`: one node of a Concord
// cluster, an app.Node running the roles its configuration names (any of
// the gateway, api, guild, data, readstate, presence and relay roles and
// the roles of package roles' Table: voice, live comments), registered
// in the registry (etcd) under a lease and talking to the others over
// gRPC (runtime/transport) and HTTP. Everything a node does is
// runtime/app's, the same code `concord dev` runs with every role in one
// process; this package names the roles a node can run and the ones it
// runs by default. See docs/architecture.md ("One wiring").
//
//   - guild: the guild actors of the guilds the placement ring (a
//     consistent-hash ring over the live guild nodes) gives this node,
//     the GuildNode gRPC service gateways subscribe sessions through
//     (runtime/guildrole), and the REST API and the bot platform for
//     those guilds (runtime/apirole's GuildREST).
//   - api: the public REST endpoint (runtime/apirole): each request is
//     forwarded to the guild node owning its guild; GET /gateway/bot is
//     answered there.
//   - gateway: the WebSocket gateway (also on the root path);
//     runtime/gatewayrole. It answers the session directory for its
//     sessions.
//   - data: the message reads and writes of the channels a second ring
//     gives this node, coalesced (--data-nodes=ring on the others);
//     runtime/datarole.
//   - readstate: read markers and mention counts fed from the Kafka
//     event log, sharded by user on a ring over the replicas;
//     runtime/readstaterole.
//   - presence: every live session folded into one status per user,
//     sharded by user on a ring over the replicas; runtime/presencerole.
//   - relay: the fan-out tier of big guilds (runtime/relayrole).
//
// Every process of a cluster shares the store (Cassandra), the registry
// (etcd) and the token-signing key.
package cluster

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/presencerole"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/relayrole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/roles"
)

// The roles of the chat table that are not the registry's core ones.
const (
	// RoleReadState is the read-state role (runtime/readstaterole).
	RoleReadState = readstaterole.Name
	// RolePresence is the presence role (runtime/presencerole).
	RolePresence = presencerole.Name
	// RoleRelay is the relay role: the fan-out tier of big guilds.
	RoleRelay = relayrole.Name
)

// Roles a node can run: every role of the role tables.
var Roles = app.DefaultTables().Names()

// DefaultRoles are the roles of a node given none: every role but data,
// which only matters with --data-nodes=ring, and readstate, which needs
// Kafka (--eventlog=kafka://...).
var DefaultRoles = []string{registry.RoleGateway, registry.RoleAPI, registry.RoleGuild}

// Where message reads and writes go (Config.DataNodes).
const (
	// DataLocal: each node calls the store directly.
	DataLocal = config.DataLocal
	// DataRing: each node sends them to the data node owning the channel
	// on the ring of live data-role nodes.
	DataRing = config.DataRing
)

// Config configures one cluster node (runtime/config).
type Config = config.Config

// PodConfig is what the operator sets on a node's pod (runtime/config).
type PodConfig = config.Pod

// tableRoles are the roles built through package role after the chat
// roles, and chatRoles the chat roles (variables so a test can add or
// wrap one).
var (
	tableRoles = roles.Table
	chatRoles  = roles.Chat
)

// Node is one running cluster process.
type Node struct {
	*app.Node

	// What the in-package tests reach, from the node.
	seams      *role.Seams
	reg        registry.Registry
	guilds     *guild.Service
	gateway    *gateway.Node
	readStates *readstaterole.Backend
}

// New checks cfg, binds the listeners, opens the backends and builds the
// node's roles (app.Open). Serve registers the node and serves; Close
// releases everything.
func New(ctx context.Context, cfg Config) (*Node, error) {
	n, err := app.Open(ctx, cfg, app.Options{Tables: app.Tables{Chat: chatRoles, Table: tableRoles}})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &Node{Node: n, seams: n.Seams(), reg: n.Registry(), guilds: n.Guilds(), gateway: n.Gateway(), readStates: n.ReadStates()}, nil
}

// withDefaults completes and checks cfg as New does.
func withDefaults(c Config) (Config, error) {
	c, _, err := app.Check(c, app.Tables{Chat: chatRoles, Table: tableRoles})
	return c, err
}
