// Package cluster runs Concord's roles as separate processes: one Node is
// one `concord serve --roles=...` process, running any of the gateway,
// api and guild roles, registered in the registry (etcd) under a lease
// and talking to the others over gRPC (runtime/transport) and HTTP.
//
//   - guild: the guild actors of the guilds the placement ring (a
//     consistent-hash ring over the live guild nodes) gives this node,
//     the REST API for them on the node's HTTP listener, and the
//     GuildNode gRPC service gateways subscribe sessions through. Events
//     go to gateway nodes over GatewayNode.Deliver. Actors of guilds the
//     ring moves away are unloaded.
//   - api: the public REST endpoint. Each request is reverse-proxied to
//     the HTTP address of the guild node owning its guild (proxy.go).
//   - gateway: the WebSocket gateway. Identify is answered locally from
//     the store; sessions are subscribed to their guilds on the owners,
//     and resubscribed when the ring moves a guild (gatewayrole.go).
//   - readstate: read markers and mention counts fed from the Kafka
//     event log, served over ReadStateNode to guild nodes (acks) and
//     gateway nodes (READY read_state); readstaterole.go. With
//     --eventlog=kafka://, guild nodes publish message events through an
//     outbox in their data directory.
//   - presence: every live session folded into one status per user,
//     served over PresenceNode to gateway nodes and broadcast to friends'
//     gateways and the guild nodes owning the user's guilds
//     (presencerole.go). Gateway and guild nodes take part with
//     --presence; run one presence node.
//
// Every process of a cluster shares the store (Cassandra), the registry
// (etcd) and the token-signing key. `concord dev` does not use this
// package: it runs every role in one process with in-process calls
// (runtime/platform).
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/api"
	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/dataservice"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/httpserve"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/transport"
)

// Roles a node can run.
var Roles = []string{registry.RoleGateway, registry.RoleAPI, registry.RoleGuild, registry.RoleData, RoleReadState, RolePresence, RoleRelay}

// DefaultRoles are the roles of a node given none: every role but data,
// which only matters with --data-nodes=ring, and readstate, which needs
// Kafka (--eventlog=kafka://...).
var DefaultRoles = []string{registry.RoleGateway, registry.RoleAPI, registry.RoleGuild}

// Where message reads and writes go (Config.DataNodes).
const (
	// DataLocal: each node calls the store directly.
	DataLocal = "local"
	// DataRing: each node sends them to the data node owning the channel
	// on the ring of live data-role nodes.
	DataRing = "ring"
)

// Config configures one cluster node. Zero fields take the stated
// defaults.
type Config struct {
	// Platform holds the settings shared with `concord dev`: HTTP (the
	// REST / gateway / metrics listener), DataDir, Store, Registry, Node,
	// Worker and Process (unique per process), PublicURL, ServerKey
	// (shared by every process), ShutdownTimeout and Logger.
	Platform platform.Config
	// Roles this node runs, a non-empty subset of Roles.
	Roles []string
	// GRPC is the listen address of the node's gRPC server (gateway and
	// guild roles). Default 127.0.0.1:0.
	GRPC string
	// AdvertiseHost replaces the host of both listen addresses in the
	// registry (for listeners on 0.0.0.0). Default: the listener's host.
	AdvertiseHost string
	// LeaseTTL is how long a dead node stays in the registry, hence
	// about how long its guilds are unavailable. Default 5s.
	LeaseTTL time.Duration
	// RetryInterval is how often gateways retry failed subscriptions and
	// guild nodes unload guilds placed elsewhere. Default 1s.
	RetryInterval time.Duration
	// CallTimeout bounds each gRPC call between nodes. Default 5s.
	CallTimeout time.Duration
	// DataNodes is where guild, api and gateway roles send message reads
	// and writes: DataLocal (default) to the store directly, DataRing to
	// the data-role node owning the channel (so identical in-flight reads
	// of a channel merge there), retrying on the new owner when that node
	// dies. Guild state and accounts always go to the store directly.
	DataNodes string
	// ReadStateFlush is how long a read-state change may stay only in the
	// memory of a readstate node before it is written to the table (and
	// the event log offsets below it are committed). Default 30s.
	ReadStateFlush time.Duration
	// Presence turns on presence, member lists (op 8, op 14) and focused
	// typing on gateway and guild nodes: gateways report their sessions
	// and op 3 to the presence node (--roles=presence; run one) and send
	// op 8 and op 14 to the guild's owner. On for a node that runs the
	// presence role.
	Presence bool
	// PresenceWindow is the presence role's coalescing window (default
	// 5s).
	PresenceWindow time.Duration
	// PresenceReportInterval is how often gateway nodes re-report their
	// sessions to the presence node (default 15s). The presence role
	// forgets a gateway's sessions after three intervals without a
	// report, and a fresh presence node absorbs re-reports silently for
	// two.
	PresenceReportInterval time.Duration
	// NoRateLimits turns the api role's REST rate limits off (ADR-09 is on
	// by default): for load tests and trusted internal callers only.
	NoRateLimits bool
	// Admin is the listen address of the admin endpoint (/admin/..., plus
	// /metrics, /healthz and /readyz), kept off the public listener. Empty
	// serves /admin/... on the HTTP listener: only for private networks
	// and tests.
	Admin string
	// Identify is the gateway role's identify throttle (identify.go).
	Identify IdentifyConfig
	// SnowflakeAuto makes the node claim a free snowflake worker/process
	// pair in the registry (snowflake.go) instead of Platform.Worker and
	// Process: pods started from one template cannot be told theirs.
	SnowflakeAuto bool
	// Pod holds the operator's settings for the node (podconfig.go).
	Pod PodConfig
}

func (c Config) has(role string) bool { return slices.Contains(c.Roles, role) }

// allRoles reports whether the node runs gateway, api and guild: the
// data role is optional even for a single process.
func (c Config) allRoles() bool {
	for _, r := range DefaultRoles {
		if !c.has(r) {
			return false
		}
	}
	return true
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Roles) == 0 {
		return c, errors.New("cluster: no roles")
	}
	for _, r := range c.Roles {
		if !slices.Contains(Roles, r) {
			return c, fmt.Errorf("cluster: unknown role %q (want %s)", r, strings.Join(Roles, ", "))
		}
	}
	d := platform.DefaultConfig()
	if c.Platform.HTTP == "" {
		c.Platform.HTTP = d.HTTP
	}
	if c.Platform.DataDir == "" {
		c.Platform.DataDir = d.DataDir
	}
	if c.Platform.Node == "" {
		c.Platform.Node = d.Node
	}
	if c.Platform.ShutdownTimeout <= 0 {
		c.Platform.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.Platform.Logger == nil {
		c.Platform.Logger = slog.Default()
	}
	if c.GRPC == "" {
		c.GRPC = "127.0.0.1:0"
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 5 * time.Second
	}
	if c.has(RolePresence) {
		c.Presence = true
	}
	if c.PresenceWindow <= 0 {
		c.PresenceWindow = 5 * time.Second
	}
	if c.PresenceReportInterval <= 0 {
		c.PresenceReportInterval = gateway.DefaultReportInterval
	}
	switch c.DataNodes {
	case "":
		c.DataNodes = DataLocal
	case DataLocal, DataRing:
	default:
		return c, fmt.Errorf("cluster: unknown --data-nodes %q (want %s or %s)", c.DataNodes, DataLocal, DataRing)
	}
	switch ev := c.Platform.EventLog; {
	case ev == "" || ev == "mem" || ev == "memlog":
		if c.has(RoleReadState) {
			return c, errors.New("cluster: the readstate role consumes the shared event log: set --eventlog=kafka://host:port on every node")
		}
	case kafkaLog(ev):
	default:
		return c, fmt.Errorf("cluster: --eventlog=%q: processes of a cluster share only kafka://host:port", platform.RedactURL(ev))
	}
	if c.has(registry.RoleData) && !sharedStore(c.Platform.Store) {
		return c, fmt.Errorf("cluster: the data role needs a shared store (--store=cassandra://host:port/keyspace), not %q", c.Platform.Store)
	}
	if !c.allRoles() && !sharedStore(c.Platform.Store) {
		return c, fmt.Errorf("cluster: --store=%q is not shared between processes; a node running only %s needs "+
			"--store=cassandra://host:port/keyspace (a Pebble store serves one process running every role)",
			c.Platform.Store, strings.Join(c.Roles, ","))
	}
	if !c.allRoles() && c.Platform.ServerKey == "" {
		return c, errors.New("cluster: nodes running some roles must share the token key: set --server-key")
	}
	return c, nil
}

// Node is one running cluster process.
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *prometheus.Registry
	m       *metrics
	ready   atomic.Bool

	reg      registry.Registry
	stopReg  func()
	store    store.Store
	guildRng *registry.LocalRing
	// data role and --data-nodes=ring
	dataSvc    *dataservice.Service
	dataRng    *registry.LocalRing
	dataClient transport.DataClient
	gwRing     *registry.LocalRing
	// --eventlog=kafka://: the guild role's event log and outbox, the
	// readstate role, and the client guild and gateway roles reach the
	// readstate nodes with.
	pub      *publisher
	rsRole   *readStateRole
	rsLocal  *guild.Service
	rsGuilds transport.GuildClient
	rsRing   *registry.LocalRing
	rsClient transport.ReadStateClient
	// --roles=presence, and --presence on gateway and guild nodes.
	// --roles=relay: the relay's gateway client; guild nodes: the relay
	// router of guilds with a relay tier and its client.
	// api role: the REST limiter's counters (--redis, or per node).
	rlCounters  counters.Counters
	relaySink   transport.GatewayClient
	relays      *relayRouter
	relayClient transport.RelayClient
	psRole      *presenceRole
	psGuilds    transport.GuildClient
	psSink      transport.GatewayClient
	psRing      *registry.LocalRing
	psClient    transport.PresenceClient
	psCache     *presenceCache

	httpL, grpcL, adminL net.Listener
	grpc                 *transport.Server
	handler              http.Handler

	guilds    *guild.Service // guild role
	guildRole *guildRole
	sink      transport.GatewayClient
	gateway   *gateway.Node // gateway role
	gwBackend *gatewayBackend
	drain     drainer // POST /admin/drain (drain.go)
	// adminToken guards /admin/ and goes on admin calls to other nodes.
	adminToken string
	admission  *identifyAdmission
	identify   *guild.Service
	client     transport.GuildClient

	// snowflakeLost is closed if the node's snowflake claim is lost
	// (snowflake.go); Serve then stops.
	snowflakeLost <-chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New opens the backends, binds both listeners and wires the roles. Serve
// registers the node and serves; Close releases everything.
func New(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Pod.validate(cfg); err != nil {
		return nil, err
	}
	log := cfg.Platform.Logger.With("node", cfg.Platform.Node)
	n := &Node{cfg: cfg, log: log, metrics: prometheus.NewRegistry(), stopReg: func() {}}
	// Go and process collectors, and the transport's metrics, live in
	// the default registry; /metrics serves both.
	if n.m, err = newMetrics(n.metrics); err != nil {
		return nil, fmt.Errorf("cluster: metrics: %w", err)
	}
	if err := registerPodMetrics(n.metrics, cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := os.MkdirAll(cfg.Platform.DataDir, 0o700); err != nil {
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
	key, err := platform.ServerKey(cfg.Platform)
	if err != nil {
		return nil, err
	}
	n.adminToken = nodeAdminToken(cfg.Platform, key)
	issuer, err := auth.New(auth.Config{Key: key}, st)
	if err != nil {
		return nil, fmt.Errorf("cluster: auth: %w", err)
	}
	ids, err := snowflake.New(snowflake.Config{Worker: cfg.Platform.Worker, Process: cfg.Platform.Process, Registerer: n.metrics})
	if err != nil {
		return nil, fmt.Errorf("cluster: snowflake: %w", err)
	}
	if n.guildRng, err = registry.NewLocalRing(ctx, n.reg, registry.RoleGuild, ringCfg); err != nil {
		return nil, fmt.Errorf("cluster: guild ring: %w", err)
	}
	if n.httpL, err = net.Listen("tcp", cfg.Platform.HTTP); err != nil {
		return nil, fmt.Errorf("cluster: listen %s: %w", cfg.Platform.HTTP, err)
	}
	if cfg.Admin != "" {
		if n.adminL, err = net.Listen("tcp", cfg.Admin); err != nil {
			return nil, fmt.Errorf("cluster: listen %s: %w", cfg.Admin, err)
		}
	}
	if cfg.has(registry.RoleGateway) || cfg.has(registry.RoleGuild) || cfg.has(registry.RoleData) || cfg.has(RoleReadState) || cfg.has(RolePresence) || cfg.has(RoleRelay) {
		if n.grpcL, err = net.Listen("tcp", cfg.GRPC); err != nil {
			return nil, fmt.Errorf("cluster: listen %s: %w", cfg.GRPC, err)
		}
	}
	res := newResolver(st)
	clientCfg := transport.ClientConfig{CallTimeout: cfg.CallTimeout, Errors: guildErrors, Logger: log.With("component", "transport")}
	svc := transport.Services{Node: cfg.Platform.Node}

	if cfg.has(registry.RoleData) {
		n.dataSvc = dataservice.New(n.store, dataservice.Config{Name: cfg.Platform.Node, Logger: log.With("component", "data")})
		svc.Data = n.dataSvc
	}

	readStates := kafkaLog(cfg.Platform.EventLog)
	if readStates && (cfg.has(registry.RoleGuild) || cfg.has(registry.RoleGateway)) {
		if n.rsRing, err = registry.NewLocalRing(ctx, n.reg, RoleReadState, ringCfg); err != nil {
			return nil, fmt.Errorf("cluster: read-state ring: %w", err)
		}
		n.rsClient = transport.NewReadStateClient(clientCfg, n.rsRing)
	}
	if cfg.has(RoleReadState) {
		// Visibility is asked of the guild owners; this service only
		// maps channels to guilds and answers private channels from the
		// store, and never loads an actor.
		if n.rsLocal, err = guild.NewService(guild.Config{Logger: log.With("component", "readstate-guilds")},
			guild.Deps{Store: st, Sink: discardSink{}, IDs: ids, Auth: issuer}); err != nil {
			return nil, fmt.Errorf("cluster: read-state guild service: %w", err)
		}
		n.rsGuilds = transport.NewGuildClient(clientCfg, n.guildRng)
		if n.rsRole, err = openReadStateRole(ctx, cfg, n, n.rsLocal, n.rsGuilds); err != nil {
			return nil, err
		}
		svc.ReadStates = n.rsRole.svc
	}

	if cfg.has(registry.RoleGuild) || cfg.has(RolePresence) || cfg.has(RoleRelay) {
		if n.gwRing, err = registry.NewLocalRing(ctx, n.reg, registry.RoleGateway, ringCfg); err != nil {
			return nil, fmt.Errorf("cluster: gateway ring: %w", err)
		}
	}
	if cfg.has(RolePresence) {
		n.psSink = transport.NewGatewayClient(clientCfg, n.gwRing)
		n.psGuilds = transport.NewGuildClient(clientCfg, n.guildRng)
		if n.psRole, err = openPresenceRole(cfg, n, st, n.psGuilds, n.guildRng, n.psSink); err != nil {
			return nil, err
		}
		svc.Presence = n.psRole.backend()
	}
	if cfg.has(registry.RoleGateway) && cfg.Presence {
		if n.psRing, err = registry.NewLocalRing(ctx, n.reg, RolePresence, ringCfg); err != nil {
			return nil, fmt.Errorf("cluster: presence ring: %w", err)
		}
		n.psClient = transport.NewPresenceClient(clientCfg, n.psRing)
	}

	if cfg.has(RoleRelay) {
		n.relaySink = transport.NewGatewayClient(clientCfg, n.gwRing)
		svc.Relay = n.relaySink
	}
	if cfg.has(registry.RoleGuild) {
		n.sink = transport.NewGatewayClient(clientCfg, n.gwRing)
		n.relayClient = transport.NewRelayClient(clientCfg)
		if n.relays, err = newRelayRouter(n.relayClient, n.metrics, log.With("component", "relays")); err != nil {
			return nil, fmt.Errorf("cluster: relays: %w", err)
		}
		if n.guilds, err = guild.NewService(guild.Config{Logger: log.With("component", "guild"), Registerer: n.metrics, ShadowEvery: cfg.Platform.PermissionsShadowEvery},
			guild.Deps{Store: st, Sink: n.sink, IDs: ids, Auth: issuer, Relays: n.relays}); err != nil {
			return nil, fmt.Errorf("cluster: guild service: %w", err)
		}
		owns := transport.OwnedBy(n.guildRng, cfg.Platform.Node)
		deps := api.Deps{Store: st, Guilds: n.guilds, Auth: issuer, IDs: ids}
		if readStates {
			if n.pub, err = openPublisher(ctx, cfg, n); err != nil {
				return nil, err
			}
			// MESSAGE_ACK goes through this node's DispatchToUser, which
			// reaches the user's sessions subscribed to guilds it owns.
			deps.Events, deps.ReadStates, deps.Users = n.pub.outbox, n.rsClient, n.guilds
		}
		restAPI := api.New(api.Config{GatewayURL: cfg.Platform.PublicURL, Logger: log.With("component", "api")}, deps)
		n.guildRole = &guildRole{
			node:    cfg.Platform.Node,
			svc:     n.guilds,
			ring:    n.guildRng,
			owns:    owns,
			res:     res,
			api:     restAPI,
			metrics: n.m,
			dedupe:  &sendDeduper{store: st, auth: issuer, api: restAPI, log: log.With("component", "guild")},
			log:     log.With("component", "guild"),
		}
		if cfg.Presence {
			if n.psCache, err = enableGuildPresence(n.guilds, n.metrics); err != nil {
				return nil, err
			}
		}
		svc.Guild, svc.Owns = guildBackend{svc: n.guilds, presences: n.psCache}, owns
	}
	if cfg.has(registry.RoleGateway) {
		// Identify only reads the store; this service never loads an
		// actor, so it needs no working sink.
		if n.identify, err = guild.NewService(guild.Config{Logger: log.With("component", "identify")},
			guild.Deps{Store: st, Sink: discardSink{}, IDs: ids, Auth: issuer}); err != nil {
			return nil, fmt.Errorf("cluster: identify service: %w", err)
		}
		n.client = transport.NewGuildClient(clientCfg, n.guildRng)
		n.gwBackend = newGatewayBackend(guild.NewGatewayBackend(n.identify), st, n.client, n.guildRng,
			cfg.CallTimeout, n.m, log.With("component", "gateway"))
		if n.rsClient != nil {
			n.gwBackend.states = n.rsClient
		}
		gwCfg := gateway.Config{
			Node:       cfg.Platform.Node,
			PublicURL:  cfg.Platform.PublicURL,
			Logger:     log.With("component", "gateway"),
			Registerer: n.metrics,
		}
		if n.psClient != nil {
			p := newGatewayPresence(cfg.Platform.Node, n.psClient, n.client, log.With("component", "presence"))
			gwCfg.Presence, gwCfg.OpHandlers = p, p.opHandlers()
		}
		if n.admission, err = newIdentifyAdmission(ctx, cfg, n.gwBackend, n.metrics, log.With("component", "identify")); err != nil {
			return nil, err
		}
		if n.gateway, err = gateway.NewNode(gwCfg, n.admission); err != nil {
			return nil, fmt.Errorf("cluster: gateway: %w", err)
		}
		n.gateway.SetHandoffBackend(n.gwBackend) // drain.go
		svc.Gateway = n.gateway
	}
	if n.grpcL != nil {
		if n.grpc, err = transport.NewServer(transport.ServerConfig{Errors: guildErrors, Logger: log.With("component", "transport")}, svc); err != nil {
			return nil, fmt.Errorf("cluster: grpc server: %w", err)
		}
	}
	var proxy http.Handler
	if cfg.has(registry.RoleAPI) {
		proxy = newProxy(n.guildRng, res, 2*cfg.LeaseTTL+time.Second, n.m, log.With("component", "proxy"))
		if !cfg.NoRateLimits {
			wrap, c, err := openRateLimit(ctx, cfg, st, issuer, n.metrics)
			if err != nil {
				return nil, err
			}
			n.rlCounters = c
			if proxy, err = wrap(proxy); err != nil {
				return nil, err
			}
		}
	}
	n.handler = n.routes(proxy)
	return n, nil
}

// routes builds the HTTP handler: REST (forwarded by the api role, served
// by the guild role), the gateway, and the operational endpoints.
func (n *Node) routes(proxy http.Handler) http.Handler {
	mux := http.NewServeMux()
	rest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case n.guildRole != nil && (proxy == nil || r.Header.Get(forwardedHeader) != ""):
			n.guildRole.ServeHTTP(w, r)
		case proxy != nil:
			proxy.ServeHTTP(w, r)
		default:
			writeError(w, http.StatusNotFound, "404: Not Found")
		}
	})
	mux.Handle("/api/", rest)
	if n.gateway != nil {
		mux.Handle("/gateway", n.gateway)
		mux.Handle("/gateway/", n.gateway)
	}
	n.operationalRoutes(mux)
	if n.cfg.Admin == "" {
		n.adminRoutes(mux)
	}
	mux.Handle("/", rest)
	return mux
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
	rctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	serving := n.cfg.Platform.ServingConfig()
	srv := httpserve.NewServer(n.handler, serving)
	errc := make(chan error, 2)
	go func() { errc <- httpserve.Serve(srv, n.httpL, serving) }()
	var adminSrv *http.Server
	if n.adminL != nil {
		adminSrv = httpserve.NewServer(n.adminHandler(), serving)
		go func() { errc <- httpserve.Serve(adminSrv, n.adminL, serving) }()
	}
	if n.grpc != nil {
		go func() { errc <- n.grpc.Serve(n.grpcL) }()
	}
	if n.guildRole != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.guildRole.sweep(rctx, n.cfg.RetryInterval)
		}()
	}
	if n.rsRole != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.rsRole.run(rctx)
		}()
	}
	if n.psRole != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.psRole.run(rctx)
		}()
	}
	if n.gateway != nil && n.psClient != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.gateway.RunReports(rctx, n.cfg.PresenceReportInterval)
		}()
	}
	if n.relays != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.relays.follow(rctx, n.reg, n.cfg.RetryInterval)
		}()
	}
	if n.gwBackend != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.gwBackend.follow(rctx, n.cfg.RetryInterval)
		}()
	}
	node := registry.Node{
		Name:     n.cfg.Platform.Node,
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
	select {
	case err := <-errc:
		return fmt.Errorf("cluster: serve: %w", err)
	case <-n.snowflakeLost:
		n.ready.Store(false)
		_ = regn.Close(context.Background())
		return fmt.Errorf("cluster: snowflake pair %s lost to another node while the registry lease lapsed: stopping before ids collide",
			snowflakeLabel(n.cfg.Platform.Worker, n.cfg.Platform.Process))
	case <-ctx.Done():
	}
	n.ready.Store(false)
	n.log.Info("shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), n.cfg.Platform.ShutdownTimeout)
	defer scancel()
	if err := regn.Close(sctx); err != nil {
		n.log.Warn("leave registry", "err", err)
	}
	if n.gateway != nil {
		n.gateway.Drain(sctx)
	}
	if adminSrv != nil {
		_ = adminSrv.Shutdown(sctx)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cluster: shutdown: %w", err)
	}
	return nil
}

// Close stops every role and releases the backends.
func (n *Node) Close() error {
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
	var errs []error
	if n.gateway != nil {
		n.gateway.Close()
	}
	if n.grpc != nil {
		n.grpc.Stop()
	}
	if n.client != nil {
		errs = append(errs, n.client.Close())
	}
	errs = append(errs, n.admission.close())
	if n.dataClient != nil {
		errs = append(errs, n.dataClient.Close())
	}
	if n.dataRng != nil {
		n.dataRng.Close()
	}
	for _, c := range []interface{ Close() error }{n.psClient, n.psGuilds, n.psSink} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if n.psRing != nil {
		n.psRing.Close()
	}
	if n.rsClient != nil {
		errs = append(errs, n.rsClient.Close())
	}
	if n.rsRing != nil {
		n.rsRing.Close()
	}
	if n.rsRole != nil {
		cctx, cancel := context.WithTimeout(context.Background(), n.cfg.Platform.ShutdownTimeout)
		errs = append(errs, n.rsRole.close(cctx))
		cancel()
	}
	if n.rsGuilds != nil {
		errs = append(errs, n.rsGuilds.Close())
	}
	if n.rsLocal != nil {
		errs = append(errs, n.rsLocal.Close())
	}
	if n.guilds != nil {
		errs = append(errs, n.guilds.Close())
	}
	errs = append(errs, n.pub.close())
	if n.identify != nil {
		errs = append(errs, n.identify.Close())
	}
	if n.rlCounters != nil {
		errs = append(errs, n.rlCounters.Close())
	}
	for _, c := range []interface{ Close() error }{n.relaySink, n.relayClient} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if n.sink != nil {
		errs = append(errs, n.sink.Close())
	}
	if n.gwRing != nil {
		n.gwRing.Close()
	}
	if n.guildRng != nil {
		n.guildRng.Close()
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
	if n.dataSvc != nil {
		errs = append(errs, n.dataSvc.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}
