// Package cluster runs Concord's roles as one node of a cluster: one Node
// is one `concord serve --roles=...` process, running any of the gateway,
// api, guild, data, readstate, presence and relay roles (and the roles of
// the table in roles.go), registered in the registry (etcd) under a lease
// and talking to the others over gRPC (runtime/transport) and HTTP. Its
// configuration is runtime/config's, shared with `concord dev`; what both
// modes do the same way is runtime/app's (the store and coalescing data
// service, the token key, the event log's outbox, the one role.Build
// pass, the routes with the root-path WebSocket upgrade, the lifecycle
// group); what is the cluster's is here: the registry, the snowflake
// claim, the data ring, the gRPC listener and server, registration,
// pod labels and the per-guild statistics on the admin endpoints.
//
//   - guild: the guild actors of the guilds the placement ring (a
//     consistent-hash ring over the live guild nodes) gives this node
//     and the GuildNode gRPC service gateways subscribe sessions
//     through (runtime/guildrole: events go to gateway nodes over
//     GatewayNode.Deliver; actors of guilds the ring moves away are
//     unloaded), with the REST API and the bot platform for those
//     guilds on the node's HTTP listener (runtime/apirole's GuildREST).
//   - api: the public REST endpoint (runtime/apirole). Each request is
//     reverse-proxied to the HTTP address of the guild node owning its
//     guild, bot routes included; GET /gateway/bot is answered there.
//   - gateway: the WebSocket gateway (also on the root path);
//     runtime/gatewayrole. Identify is answered locally from the store
//     through runtime/admission, with bots' entitlement leases; sessions
//     are subscribed to their guilds on the owners, and resubscribed when
//     the ring moves a guild. The node answers the session directory for
//     its sessions: guild nodes find a user's sessions on every gateway
//     node for DMs, acks and guilds joined mid-session. What the role
//     consumes from parts that are not roles yet is provided in
//     gatewayrole.go.
//   - data: the message reads and writes of the channels a second ring
//     gives this node, coalesced (--data-nodes=ring on the others);
//     runtime/datarole.
//   - readstate: read markers and mention counts fed from the Kafka
//     event log, served over ReadStateNode to guild nodes (acks) and
//     gateway nodes (READY read_state), sharded by user on a ring over
//     the replicas; runtime/readstaterole. With --eventlog=kafka://,
//     guild nodes publish message events through an outbox in their
//     data directory (publisher.go).
//   - presence: every live session folded into one status per user,
//     served over PresenceNode to gateway nodes and broadcast to friends'
//     gateways and the guild nodes owning the user's guilds. Gateway and
//     guild nodes take part with --presence. Sharded by user on a ring
//     over the replicas; runtime/presencerole.
//   - relay: the fan-out tier of big guilds (runtime/relayrole; the
//     guild side's relay router is relay.go).
//
// The data, guild, readstate, presence, relay, api and gateway roles, and
// the roles of package roles' Table (voice, live comments), are role.Role
// values built by the same Build in `concord dev`; the node builds the
// ones it runs in one pass (app.Process.Build) with its registry, gRPC
// services and seams (role.Seams); see docs/architecture.md ("One
// wiring") for what is shared and what is not yet.
//
// Every process of a cluster shares the store (Cassandra), the registry
// (etcd) and the token-signing key.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/datarole"
	"github.com/concord-chat/concord/runtime/dataservice"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/guildrole"
	"github.com/concord-chat/concord/runtime/httpserve"
	"github.com/concord-chat/concord/runtime/presencerole"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/relayrole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/transport"
	"github.com/concord-chat/concord/web"
)

// RoleRelay is the relay role: the fan-out tier of big guilds. A relay
// node serves RelayNode over gRPC and delivers what it receives to the
// gateway nodes over its own GatewayNode streams (runtime/relayrole).
const RoleRelay = relayrole.Name

// Roles a node can run.
var Roles = append([]string{registry.RoleGateway, registry.RoleAPI, registry.RoleGuild, registry.RoleData, RoleReadState, RolePresence, RoleRelay}, tableRoleNames()...)

// tableRoleNames are the names of tableRoles.
func tableRoleNames() []string {
	var out []string
	for _, r := range tableRoles {
		out = append(out, r.Name)
	}
	return out
}

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

// Config configures one cluster node: the process configuration of
// runtime/config, whose Roles name this node's roles and whose defaults
// are the only ones.
type Config = config.Config

// has reports whether c runs role.
func has(c Config, role string) bool { return slices.Contains(c.Roles, role) }

// allRoles reports whether the node runs gateway, api and guild: the
// data role is optional even for a single process.
func allRoles(c Config) bool {
	for _, r := range DefaultRoles {
		if !has(c, r) {
			return false
		}
	}
	return true
}

// withDefaults completes c (config.Complete) and checks the settings
// against the node's roles.
func withDefaults(c Config) (Config, error) {
	if len(c.Roles) == 0 {
		return c, errors.New("cluster: no roles")
	}
	for _, r := range c.Roles {
		if !slices.Contains(Roles, r) && !slices.Contains(tableRoleNames(), r) {
			return c, fmt.Errorf("cluster: unknown role %q (want %s)", r, strings.Join(Roles, ", "))
		}
	}
	c, err := c.Complete()
	if err != nil {
		return c, fmt.Errorf("cluster: %w", err)
	}
	if has(c, RolePresence) {
		c.Presence.Enabled = true
	}
	switch ev := c.EventLog; {
	case ev == "mem" || ev == "memlog":
		if has(c, RoleReadState) {
			return c, errors.New("cluster: the readstate role consumes the shared event log: set --eventlog=kafka://host:port on every node")
		}
	case kafkaLog(ev):
	default:
		return c, fmt.Errorf("cluster: --eventlog=%q: processes of a cluster share only kafka://host:port", config.RedactURL(ev))
	}
	if has(c, registry.RoleData) && !sharedStore(c.Store) {
		return c, fmt.Errorf("cluster: the data role needs a shared store (--store=cassandra://host:port/keyspace), not %q", c.Store)
	}
	if !allRoles(c) && !sharedStore(c.Store) && !storeless(c) {
		return c, fmt.Errorf("cluster: --store=%q is not shared between processes; a node running only %s needs "+
			"--store=cassandra://host:port/keyspace (a Pebble store serves one process running every role)",
			c.Store, strings.Join(c.Roles, ","))
	}
	if !allRoles(c) && c.ServerKey == "" {
		return c, errors.New("cluster: nodes running some roles must share the token key: set --server-key")
	}
	return c, nil
}

// Node is one running cluster process.
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *prometheus.Registry
	ready   atomic.Bool

	reg      registry.Registry
	stopReg  func()
	store    store.Store
	guildRng *registry.LocalRing
	// data role and --data-nodes=ring
	dataRng    *registry.LocalRing
	dataClient transport.DataClient
	// --eventlog=kafka://: the guild role's event log and outbox
	// (publisher.go).
	pub *app.EventLog
	// readStates is the process's read-state seam (readstaterole): the
	// readstate role's service for the users this node owns, else
	// ReadStateNode on their owner.
	readStates *readstaterole.Backend
	// seams are the cross-role seams the roles built through package
	// role share (rings, clients, in-process providers).
	seams role.Seams
	// proc is the role side of the process (runtime/app): the roles
	// built on seams into its group and muxes. Its group runs the
	// roles' parts: started in Serve in the order they were added,
	// stopped in reverse by Close; /readyz answers 200 only while every
	// part is ready.
	proc *app.Process

	httpL, grpcL, adminL net.Listener
	grpc                 *transport.Server
	handler              http.Handler
	// routes are the node's HTTP routes (app.Routes).
	routes app.Routes
	// voiceEndpoints lists the endpoints of the SFUs the guild role
	// allocates from; the web client's policy admits them.
	voiceEndpoints func() []string

	guilds  *guild.Service // guild role (guildrole.Service)
	gateway *gateway.Node  // gateway role (gatewayrole.NodeKey)
	// counters are the process's counters (--redis): the REST limits,
	// bots' identifies, live comments.
	counters counters.Counters
	// adminToken guards /admin/ and goes on admin calls to other nodes.
	adminToken string

	// snowflakeLost is closed if the node's snowflake claim is lost
	// (snowflake.go); Serve then stops.
	snowflakeLost <-chan struct{}
}

// New opens the backends, binds both listeners and wires the roles. Serve
// registers the node and serves; Close releases everything.
func New(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg, err = withDefaults(cfg); err != nil {
		return nil, err
	}
	if err := validatePod(cfg); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("node", cfg.Node)
	n := &Node{cfg: cfg, log: log, metrics: prometheus.NewRegistry(), stopReg: func() {}}
	// Go and process collectors, and the transport's metrics, live in
	// the default registry; /metrics serves both.
	if err := registerPodMetrics(n.metrics, cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	reg, stopReg, err := openRegistry(ctx, cfg)
	if err != nil {
		return nil, err
	}
	n.reg, n.stopReg = reg, stopReg
	if cfg, n.snowflakeLost, err = claimSnowflake(ctx, n.reg, cfg); err != nil {
		return nil, err
	}
	n.cfg = cfg
	if n.store, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	ringCfg := registry.LocalRingConfig{Logger: log.With("component", "ring")}
	// st is the store of the roles: its message methods go to the data
	// nodes with --data-nodes=ring.
	st := n.store
	if cfg.DataNodes == DataRing {
		if n.dataRng, err = registry.NewLocalRing(ctx, n.reg, registry.RoleData, ringCfg); err != nil {
			return nil, fmt.Errorf("cluster: data ring: %w", err)
		}
		// Retry long enough to outlast a dead data node's lease: the ring
		// names the new owner once the registry dropped it.
		attempts := 6 + int(cfg.LeaseTTL/time.Second) + 1
		if n.dataClient, err = transport.NewDataClient(
			transport.ClientConfig{CallTimeout: cfg.CallTimeout, Logger: log.With("component", "data-client")},
			transport.DataClientConfig{MaxAttempts: attempts}, n.dataRng); err != nil {
			return nil, fmt.Errorf("cluster: data client: %w", err)
		}
		st = dataservice.Wrap(n.store, n.dataClient)
	}
	basics, err := app.OpenBasics(ctx, cfg, st, n.metrics)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	key, issuer, ids := basics.Key, basics.Auth, basics.IDs
	n.counters = basics.Counters
	n.adminToken = nodeAdminToken(cfg, key)
	if n.guildRng, err = role.Ring(ctx, &n.seams, n.reg, registry.RoleGuild, ringCfg); err != nil {
		return nil, fmt.Errorf("cluster: guild ring: %w", err)
	}
	if n.httpL, err = net.Listen("tcp", cfg.HTTP); err != nil {
		return nil, fmt.Errorf("cluster: listen %s: %w", cfg.HTTP, err)
	}
	if cfg.Admin != "" {
		if n.adminL, err = net.Listen("tcp", cfg.Admin); err != nil {
			return nil, fmt.Errorf("cluster: listen %s: %w", cfg.Admin, err)
		}
	}
	if has(cfg, registry.RoleGateway) || has(cfg, registry.RoleGuild) || has(cfg, registry.RoleData) || has(cfg, RoleReadState) || has(cfg, RolePresence) || has(cfg, RoleRelay) {
		if n.grpcL, err = net.Listen("tcp", cfg.GRPC); err != nil {
			return nil, fmt.Errorf("cluster: listen %s: %w", cfg.GRPC, err)
		}
	}
	clientCfg := transport.ClientConfig{CallTimeout: cfg.CallTimeout, Errors: guildrole.Errors, Logger: log.With("component", "transport")}
	svc := transport.Services{Node: cfg.Node}
	n.proc = app.NewProcess(&n.seams)
	// parts are what the roles build from.
	parts := role.Parts{Config: cfg, Logger: log, Metrics: n.metrics, Registry: n.reg, Store: st, Auth: issuer, IDs: ids,
		Counters: n.counters, AdminToken: n.adminToken, Seams: n.proc.Seams, Admin: n.proc.Admin, GRPC: &svc, ClientConfig: clientCfg}

	// What the process gives the roles: the data role coalesces over the
	// store itself, not over the process's own coalescing wrapper
	// (openStore); the api role signs with the cluster's key and, on a
	// guild node with --eventlog=kafka://, publishes message events
	// through the node's outbox.
	role.Provide(&n.seams, datarole.RawStore, unwrapStore(n.store))
	role.Provide(&n.seams, apirole.ServerKey, key)
	if kafkaLog(cfg.EventLog) && has(cfg, registry.RoleGuild) {
		if n.pub, err = openPublisher(ctx, cfg, n); err != nil {
			return nil, err
		}
		role.Provide(&n.seams, apirole.Outbox, n.pub.Outbox)
	}
	// The roles this node runs, in one role.Build pass with the same
	// Build functions as `concord dev`: a service a role provides is
	// in-process for the keys this node owns, the client of its owner
	// otherwise. The presence role is built on every node taking part in
	// presence (presencerole.Joins), not only on --roles=presence nodes.
	built, err := n.proc.Build(ctx, app.Tables{Chat: chatRoles, Table: tableRoles}, func(name string) bool {
		return has(cfg, name) || name == presencerole.Name && presencerole.Joins(cfg)
	}, parts)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.guilds, n.gateway = built.Guilds, built.Gateway
	if endpoints, ok := role.Lookup(&n.seams, guildrole.VoiceEndpoints); ok {
		n.voiceEndpoints = endpoints
	}
	if kafkaLog(cfg.EventLog) && (has(cfg, registry.RoleGuild) || has(cfg, registry.RoleGateway) || has(cfg, RoleReadState)) {
		if n.readStates, err = readstaterole.Open(ctx, parts); err != nil {
			return nil, fmt.Errorf("cluster: read states: %w", err)
		}
	}
	// The gRPC server serves what the roles set in svc.
	if n.grpcL != nil {
		if n.grpc, err = transport.NewServer(transport.ServerConfig{Errors: guildrole.Errors, Logger: log.With("component", "transport")}, svc); err != nil {
			return nil, fmt.Errorf("cluster: grpc server: %w", err)
		}
	}
	// The web client answers GET and HEAD outside /api on every node, as
	// in concord dev; other methods reach the REST handler's JSON 404.
	webOpts := web.Options{GatewayURL: cfg.PublicURL, MediaSrc: cfg.WebMediaOrigins}
	if n.voiceEndpoints != nil {
		webOpts.VoiceEndpoints = n.voiceEndpoints
	}
	n.routes = app.Routes{
		Process: n.proc,
		// Go and process collectors, and the transport's metrics, live
		// in the default registry; /metrics serves both.
		Metrics:    prometheus.Gatherers{n.metrics, prometheus.DefaultGatherer},
		Ready:      func() bool { return n.ready.Load() && n.proc.Ready() == nil },
		AdminToken: n.adminToken,
		REST:       built.REST,
		Web:        webOpts,
	}
	if n.gateway != nil {
		n.routes.Gateway = n.gateway
	}
	if cfg.Admin == "" {
		n.handler = n.routes.Handler()
	} else {
		mux := http.NewServeMux()
		n.routes.Operational(mux)
		n.routes.Public(mux)
		n.handler = mux
	}
	return n, nil
}

// HTTPAddr is the address the HTTP listener is bound to.
func (n *Node) HTTPAddr() string { return n.httpL.Addr().String() }

// AdminAddr is the address the admin listener is bound to ("" without one:
// the admin endpoints are then on the HTTP listener).
func (n *Node) AdminAddr() string {
	if n.adminL == nil {
		return ""
	}
	return n.adminL.Addr().String()
}

// GRPCAddr is the address the gRPC listener is bound to ("" without one).
func (n *Node) GRPCAddr() string {
	if n.grpcL == nil {
		return ""
	}
	return n.grpcL.Addr().String()
}

// advertise returns addr with the configured advertised host.
func (n *Node) advertise(addr string) string {
	if addr == "" || n.cfg.AdvertiseHost == "" {
		return addr
	}
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort(n.cfg.AdvertiseHost, port)
}

// Serve starts the listeners, registers the node and serves until ctx
// ends; then it leaves the registry (its guilds move at once), drains the
// gateway, flushes the guild actors and stops within ShutdownTimeout.
func (n *Node) Serve(ctx context.Context) error {
	serving := n.cfg.ServingConfig()
	srv := httpserve.NewServer(n.handler, serving)
	errc := make(chan error, 2)
	go func() { errc <- httpserve.Serve(srv, n.httpL, serving) }()
	var adminSrv *http.Server
	if n.adminL != nil {
		adminSrv = httpserve.NewServer(n.routes.AdminHandler(), serving)
		go func() { errc <- httpserve.Serve(adminSrv, n.adminL, serving) }()
	}
	if n.grpc != nil {
		go func() { errc <- n.grpc.Serve(n.grpcL) }()
	}
	n.proc.Start(ctx)
	node := registry.Node{
		Name:     n.cfg.Node,
		Roles:    n.cfg.Roles,
		Addr:     n.advertise(n.GRPCAddr()),
		HTTPAddr: n.advertise(n.HTTPAddr()),
		Labels:   n.registryLabels(),
	}
	regn, err := register(ctx, n.reg, node, n.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	n.ready.Store(true)
	n.log.Info("node registered", "roles", strings.Join(n.cfg.Roles, ","), "http", node.HTTPAddr, "grpc", node.Addr)
	err = n.proc.Serve(ctx, app.Serving{
		Server:   srv,
		Errc:     errc,
		Admin:    adminSrv,
		Logger:   n.log,
		Timeout:  n.cfg.ShutdownTimeout,
		NotReady: func() { n.ready.Store(false) },
		// A node whose snowflake pair another node claimed stops before
		// their ids collide.
		Stops: []app.Stop{{C: n.snowflakeLost, Err: fmt.Errorf("snowflake pair %s lost to another node while the registry lease lapsed: stopping before ids collide",
			snowflakeLabel(n.cfg.Worker, n.cfg.Process))}},
		// Leaving the registry first moves the node's guilds at once.
		Leave: func(ctx context.Context) {
			if err := regn.Close(ctx); err != nil {
				n.log.Warn("leave registry", "err", err)
			}
		},
		// After a failure the node leaves the registry and stops; Close
		// stops the parts.
		Abort: func() { _ = regn.Close(context.Background()) },
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// Close stops every role and releases the backends.
func (n *Node) Close() error {
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	// No call from another node reaches a part being closed.
	if n.grpc != nil {
		n.grpc.Stop()
	}
	// The roles' parts first, in reverse order (the group closes the
	// gateway role's node among them); then what the node opened for
	// them; then the rings and clients the roles shared, and the chat
	// roles' services (the guild service among them).
	var closers []func() error
	if n.counters != nil {
		closers = append(closers, n.counters.Close)
	}
	if n.dataClient != nil {
		closers = append(closers, n.dataClient.Close)
	}
	if n.dataRng != nil {
		closers = append(closers, func() error { n.dataRng.Close(); return nil })
	}
	closers = append(closers, n.pub.Close)
	if n.proc != nil {
		errs = append(errs, n.proc.Stop(sctx, closers...))
	} else {
		for _, c := range closers {
			errs = append(errs, c())
		}
	}
	if n.httpL != nil {
		n.httpL.Close()
	}
	if n.adminL != nil {
		n.adminL.Close()
	}
	if n.grpcL != nil {
		n.grpcL.Close()
	}
	if n.reg != nil {
		errs = append(errs, n.reg.Close())
	}
	n.stopReg()
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}
