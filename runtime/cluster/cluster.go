// Package cluster runs Concord's roles as one node of a cluster: one Node
// is one `concord serve --roles=...` process, running any of the gateway,
// api, guild, data, readstate, presence and relay roles (and the roles of
// the table in roles.go), registered in the registry (etcd) under a lease
// and talking to the others over gRPC (runtime/transport) and HTTP. Its
// configuration is runtime/config's, shared with `concord dev`; the parts
// both modes build the same way come from runtime/platform (store and
// coalescing data service, bot platform, GET /gateway/bot, the root-path
// WebSocket upgrade) and runtime/admission (identify).
//
//   - guild: the guild actors of the guilds the placement ring (a
//     consistent-hash ring over the live guild nodes) gives this node
//     and the GuildNode gRPC service gateways subscribe sessions
//     through (runtime/guildrole: events go to gateway nodes over
//     GatewayNode.Deliver; actors of guilds the ring moves away are
//     unloaded), and here the REST API and the bot platform for those
//     guilds on the node's HTTP listener (guildrest.go).
//   - api: the public REST endpoint. Each request is reverse-proxied to
//     the HTTP address of the guild node owning its guild (proxy.go,
//     route.go, bot routes included); GET /gateway/bot is answered here.
//   - gateway: the WebSocket gateway (also on the root path). Identify is
//     answered locally from the store through runtime/admission, with
//     bots' entitlement leases (leases.go); sessions are subscribed to
//     their guilds on the owners, and resubscribed when the ring moves a
//     guild (gatewayrole.go). The node answers the session directory for
//     its sessions (sessions.go): guild nodes find a user's sessions on
//     every gateway node for DMs, acks and guilds joined mid-session.
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
// The data, guild, readstate, presence and relay roles, and the roles of
// package roles' Table (voice, live comments), are role.Role values built
// by the same Build in `concord dev`; the node builds them into its
// lifecycle group with its registry, gRPC services and seams (role.Seams).
// The gateway and api roles, and the guild role's REST surface, are still
// wired here, one block each, and in runtime/platform for
// `concord dev`; see docs/architecture.md ("One wiring") for what is
// shared and what is not yet.
//
// Every process of a cluster shares the store (Cassandra), the registry
// (etcd) and the token-signing key.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/concord-chat/concord/web"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/admission"
	"github.com/concord-chat/concord/runtime/api"
	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/datarole"
	"github.com/concord-chat/concord/runtime/dataservice"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/guildrole"
	"github.com/concord-chat/concord/runtime/httpserve"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/presencerole"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/relayrole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/transport"
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
	m       *metrics
	ready   atomic.Bool

	reg      registry.Registry
	stopReg  func()
	store    store.Store
	guildRng *registry.LocalRing
	// data role and --data-nodes=ring
	dataRng    *registry.LocalRing
	dataClient transport.DataClient
	gwRing     *registry.LocalRing
	// --eventlog=kafka://: the guild role's event log and outbox, the
	// readstate role, and the client guild and gateway roles reach the
	// readstate nodes with.
	pub *publisher
	// readStates is the process's read-state seam (readstaterole): the
	// readstate role's service for the users this node owns, else
	// ReadStateNode on their owner.
	readStates *readstaterole.Backend
	// seams are the cross-role seams the roles built through package
	// role share (rings, clients, in-process providers).
	seams role.Seams
	// --roles=relay: the relay's gateway client; guild nodes: the relay
	// router of guilds with a relay tier and its client.
	// api role: the REST limiter's counters (--redis, or per node).
	rlCounters counters.Counters
	// psSide is the gateway's presence side (presencerole.GatewayKey) on
	// gateway nodes with --presence; nil without.
	psSide *presencerole.GatewaySide

	httpL, grpcL, adminL net.Listener
	grpc                 *transport.Server
	handler              http.Handler
	// roleMux holds the table roles' HTTP routes, roleAdmin their admin
	// endpoints.
	roleMux, roleAdmin *http.ServeMux
	// voiceEndpoints lists the endpoints of the SFUs the guild role
	// allocates from; the web client's policy admits them.
	voiceEndpoints func() []string

	guilds    *guild.Service // guild role (guildrole.Service)
	bots      *platform.Bots // guild role
	botStore  bots.Store     // api role without the guild role
	guildREST *guildREST     // guild role: its REST surface
	gateway   *gateway.Node  // gateway role
	gwBackend *gatewayBackend
	drain     drainer // POST /admin/drain (drain.go)
	// adminToken guards /admin/ and goes on admin calls to other nodes.
	adminToken string
	admission  *identifyAdmission
	identify   *guild.Service
	client     transport.GuildClient // gateway role: guildrole.Client, closed with the seams
	// leasePart runs the gateway role's entitlement lease manager.
	leasePart lifecycle.Part

	// snowflakeLost is closed if the node's snowflake claim is lost
	// (snowflake.go); Serve then stops.
	snowflakeLost <-chan struct{}

	// group runs the node's loops and the table roles' parts (roles.go):
	// started in Serve in the order they were added, stopped in reverse
	// by Close; /readyz answers 200 only while every part is ready.
	group lifecycle.Group
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
	key, err := platform.ServerKey(cfg)
	if err != nil {
		return nil, err
	}
	n.adminToken = nodeAdminToken(cfg, key)
	issuer, err := auth.New(auth.Config{Key: key}, st)
	if err != nil {
		return nil, fmt.Errorf("cluster: auth: %w", err)
	}
	ids, err := snowflake.New(snowflake.Config{Worker: cfg.Worker, Process: cfg.Process, Registerer: n.metrics})
	if err != nil {
		return nil, fmt.Errorf("cluster: snowflake: %w", err)
	}
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
	res := newResolver(st)
	clientCfg := transport.ClientConfig{CallTimeout: cfg.CallTimeout, Errors: guildrole.Errors, Logger: log.With("component", "transport")}
	svc := transport.Services{Node: cfg.Node}
	n.roleMux, n.roleAdmin = http.NewServeMux(), http.NewServeMux()
	// parts are what the roles built through package role build from.
	parts := role.Parts{Config: cfg, Logger: log, Metrics: n.metrics, Registry: n.reg, Store: st, Auth: issuer, IDs: ids,
		Admin: n.roleAdmin, Seams: &n.seams, GRPC: &svc, ClientConfig: clientCfg}

	// The chat roles of the role table (data, readstate, relay) are
	// built by the same Build as in `concord dev`, before the roles that
	// call them, so that a service is in-process for the keys this node
	// owns. The data role coalesces over the store itself, not over the
	// process's own coalescing wrapper (openStore).
	role.Provide(&n.seams, datarole.RawStore, unwrapStore(n.store))
	// The presence role is built on every node taking part in presence
	// (presencerole.Joins), not only on --roles=presence nodes.
	if err := role.Build(ctx, chatRoles, func(name string) bool {
		return has(cfg, name) || name == presencerole.Name && presencerole.Joins(cfg)
	}, parts, n.roleMux, &n.group); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	readStates := kafkaLog(cfg.EventLog)
	if readStates && (has(cfg, registry.RoleGuild) || has(cfg, registry.RoleGateway) || has(cfg, RoleReadState)) {
		if n.readStates, err = readstaterole.Open(ctx, parts); err != nil {
			return nil, fmt.Errorf("cluster: read states: %w", err)
		}
	}

	if has(cfg, registry.RoleGuild) || has(cfg, RoleRelay) {
		if n.gwRing, err = role.Ring(ctx, &n.seams, n.reg, registry.RoleGateway, ringCfg); err != nil {
			return nil, fmt.Errorf("cluster: gateway ring: %w", err)
		}
	}

	if (has(cfg, registry.RoleGateway) || has(cfg, registry.RoleAPI)) && !has(cfg, registry.RoleGuild) {
		// Gateway nodes read applications (privileged intents, READY's
		// application); api nodes read interactions (routing).
		if n.botStore, err = platform.OpenBotStore(ctx, cfg, st); err != nil {
			return nil, fmt.Errorf("cluster: bot store: %w", err)
		}
	}
	if has(cfg, registry.RoleGuild) {
		// The guild role (runtime/guildrole, built with the chat roles)
		// provides the guild service; the REST API and the bot platform
		// for its guilds are served here.
		var ok bool
		if n.guilds, ok = role.Lookup(&n.seams, guildrole.Service); !ok {
			return nil, errors.New("cluster: the guild role provided no guild service")
		}
		if endpoints, ok := role.Lookup(&n.seams, guildrole.VoiceEndpoints); ok {
			n.voiceEndpoints = endpoints
		}
		owns := transport.OwnedBy(n.guildRng, cfg.Node)
		objs, err := platform.OpenObjects(ctx, cfg)
		if err != nil {
			return nil, err
		}
		dedupe := &sendDeduper{store: st, log: log.With("component", "guild")}
		deps := api.Deps{Store: st, Guilds: n.guilds, Auth: issuer, IDs: ids, Objects: objs, AttachmentKey: platform.AttachmentKey(key),
			PriorSend: dedupe.priorSend}
		// The bot platform opens after the API (it needs the guild
		// service's events); a removal reaches it through this hook, set
		// below before the node serves.
		var memberRemoved func(ctx context.Context, guildID, userID snowflake.ID)
		deps.MemberRemoved = func(ctx context.Context, guildID, userID snowflake.ID) {
			if memberRemoved != nil {
				memberRemoved(ctx, guildID, userID)
			}
		}
		if readStates {
			if n.pub, err = openPublisher(ctx, cfg, n); err != nil {
				return nil, err
			}
			// MESSAGE_ACK goes through this node's DispatchToUser, which
			// reaches the user's sessions on every gateway node through
			// the session directory.
			deps.Events, deps.ReadStates, deps.Users = n.pub.outbox, n.readStates, n.guilds
		}
		restAPI := api.New(api.Config{GatewayURL: cfg.PublicURL, MaxFileBytes: cfg.MaxFileBytes, Logger: log.With("component", "api")}, deps)
		// The bot platform runs on the guild role, beside the REST API:
		// the resolver sends each bot request to the owner of the guild it
		// acts on, so the actor it changes is local, as in `concord dev`.
		// Revocations reach the gateways through the registry.
		bus, err := entitlement.NewRegistryBus(n.reg, entitlement.DefaultPrefix)
		if err != nil {
			return nil, fmt.Errorf("cluster: revocation bus: %w", err)
		}
		var events platform.MessageEvents
		if n.pub != nil {
			events = n.pub.outbox
		}
		if n.bots, err = platform.OpenBots(ctx, cfg, key, platform.NewBotDeps(st, n.guilds, issuer, ids, events, n.metrics, bus)); err != nil {
			return nil, err
		}
		res.interactions = n.bots.Store()
		surface := http.NewServeMux()
		n.bots.Routes(surface, restAPI)
		memberRemoved = n.bots.MemberRemoved(n.guilds, platform.GuildBotFlags(n.guilds))
		n.guildREST = &guildREST{node: cfg.Node, owns: owns, res: res, api: surface, log: log.With("component", "guild")}
	}
	if has(cfg, registry.RoleGateway) {
		// Identify only reads the store; this service never loads an
		// actor, so it needs no working sink.
		if n.identify, err = guild.NewService(guild.Config{Logger: log.With("component", "identify")},
			guild.Deps{Store: st, Sink: discardSink{}, IDs: ids, Auth: issuer}); err != nil {
			return nil, fmt.Errorf("cluster: identify service: %w", err)
		}
		// The guilds this node subscribes sessions on run on the guild
		// nodes: the process's GuildNode client (guildrole.Client).
		if n.client, err = guildrole.Client(ctx, parts); err != nil {
			return nil, fmt.Errorf("cluster: guild client: %w", err)
		}
		n.gwBackend = newGatewayBackend(guild.NewGatewayBackend(n.identify), st, n.client, n.guildRng,
			cfg.CallTimeout, n.m, log.With("component", "gateway"))
		gwCfg := gateway.Config{
			Node:       cfg.Node,
			PublicURL:  cfg.PublicURL,
			Logger:     log.With("component", "gateway"),
			Registerer: n.metrics,
		}
		// The presence role's gateway side (runtime/presencerole), on
		// nodes with --presence.
		if side, ok := role.Lookup(&n.seams, presencerole.GatewayKey); ok {
			n.psSide = &side
			gwCfg.Presence, gwCfg.OpHandlers = side.Presence, side.Presence.OpHandlers()
		}
		gwCfg.OpHandlers = withVoiceOp(gwCfg.OpHandlers, n.client, log.With("component", "gateway"))
		ac := admission.Config{Apps: n.botApps()}
		if n.readStates != nil {
			ac.States = n.readStates
		}
		// Bots' entitlement leases (leases.go). On a node that also runs
		// the guild role, the bot platform's manager already exports the
		// lease metrics; this one's go unregistered.
		var leaseMetrics prometheus.Registerer = n.metrics
		if has(cfg, registry.RoleGuild) {
			leaseMetrics = nil
		}
		enf := gatewayEnforcer{node: func() *gateway.Node { return n.gateway }, backend: n.gwBackend, members: st,
			log: log.With("component", "entitlement")}
		if ac.Leases, n.leasePart, err = openGatewayLeases(n, st, enf, leaseMetrics, log.With("component", "entitlement")); err != nil {
			return nil, err
		}
		if n.admission, err = newIdentifyAdmission(ctx, cfg, n.gwBackend, ac, n.metrics, log.With("component", "identify")); err != nil {
			return nil, err
		}
		if n.gateway, err = gateway.NewNode(gwCfg, n.admission); err != nil {
			return nil, fmt.Errorf("cluster: gateway: %w", err)
		}
		n.gateway.SetHandoffBackend(n.gwBackend) // drain.go
		svc.Gateway, svc.Sessions = leavingSink{next: n.gateway, backend: n.gwBackend}, n.gwBackend
	}
	if n.grpcL != nil {
		if n.grpc, err = transport.NewServer(transport.ServerConfig{Errors: guildrole.Errors, Logger: log.With("component", "transport")}, svc); err != nil {
			return nil, fmt.Errorf("cluster: grpc server: %w", err)
		}
	}
	var proxy http.Handler
	if has(cfg, registry.RoleAPI) {
		res.interactions = n.botApps()
		// The api role answers GET /gateway/bot itself, from the identify
		// counters the gateway nodes count in, and forwards the rest.
		if n.rlCounters, err = platform.OpenCounters(ctx, cfg); err != nil {
			return nil, fmt.Errorf("cluster: api counters: %w", err)
		}
		mux := http.NewServeMux()
		gb := platform.GatewayBot{Auth: issuer, Store: st, Counters: n.rlCounters, Concurrency: cfg.Identify.Concurrency,
			PublicURL: cfg.PublicURL, Logger: log.With("component", "gateway-bot")}
		for _, v := range []string{"/api/v9", "/api/v10"} {
			mux.Handle("GET "+v+"/gateway/bot", gb)
		}
		px := newProxy(n.guildRng, res, 2*cfg.LeaseTTL+time.Second, n.m, log.With("component", "proxy"))
		px.maxUpload = maxUploadBody(cfg)
		mux.Handle("/", px)
		proxy = mux
		if !cfg.NoRateLimits {
			if proxy, err = rateLimited(cfg, n.rlCounters, st, issuer, n.metrics, proxy); err != nil {
				return nil, err
			}
		}
	}
	n.addLoops()
	parts.Counters = n.rlCounters
	if err := n.buildTableRoles(ctx, parts, n.roleMux); err != nil {
		return nil, err
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
		case n.guildREST != nil && (proxy == nil || r.Header.Get(forwardedHeader) != ""):
			n.guildREST.ServeHTTP(w, r)
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
	// The web client answers GET and HEAD outside /api on every node, as in
	// concord dev; other methods reach the REST handler's JSON 404.
	webOpts := web.Options{GatewayURL: n.cfg.PublicURL, MediaSrc: n.cfg.WebMediaOrigins}
	if n.voiceEndpoints != nil {
		webOpts.VoiceEndpoints = n.voiceEndpoints
	}
	var fallback http.Handler = platform.WebOr(web.Handler(webOpts), rest)
	if n.gateway != nil {
		fallback = platform.UpgradeOr(n.gateway, fallback)
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := n.roleMux.Handler(r); pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		fallback.ServeHTTP(w, r)
	}))
	return mux
}

// botApps is the process's bot store: the guild role's, or the one opened
// for the gateway and api roles without it.
func (n *Node) botApps() bots.Store {
	if n.bots != nil {
		return n.bots.Store()
	}
	return n.botStore
}

// addLoops adds the built-in roles' loops to the group, in build order.
func (n *Node) addLoops() {
	loop := func(name string, run func(ctx context.Context)) {
		_ = n.group.Add(lifecycle.Part{Name: name, Run: func(ctx context.Context) error { run(ctx); return nil }})
	}
	if n.gateway != nil && n.psSide != nil {
		for _, part := range n.psSide.Parts(n.gateway) {
			part.Name = "gateway/" + part.Name
			_ = n.group.Add(part)
		}
	}
	if n.gwBackend != nil {
		loop("gateway/follow-ring", func(ctx context.Context) { n.gwBackend.follow(ctx, n.cfg.RetryInterval) })
	}
	if n.leasePart.Run != nil {
		_ = n.group.Add(n.leasePart)
	}
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
		adminSrv = httpserve.NewServer(n.adminHandler(), serving)
		go func() { errc <- httpserve.Serve(adminSrv, n.adminL, serving) }()
	}
	if n.grpc != nil {
		go func() { errc <- n.grpc.Serve(n.grpcL) }()
	}
	n.group.Start(ctx)
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
	select {
	case err := <-errc:
		return fmt.Errorf("cluster: serve: %w", err)
	case err := <-n.group.Failed():
		n.ready.Store(false)
		_ = regn.Close(context.Background())
		return fmt.Errorf("cluster: %w", err)
	case <-n.snowflakeLost:
		n.ready.Store(false)
		_ = regn.Close(context.Background())
		return fmt.Errorf("cluster: snowflake pair %s lost to another node while the registry lease lapsed: stopping before ids collide",
			snowflakeLabel(n.cfg.Worker, n.cfg.Process))
	case <-ctx.Done():
	}
	n.ready.Store(false)
	n.log.Info("shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
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
	sctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	// No call from another node reaches a part being closed.
	if n.grpc != nil {
		n.grpc.Stop()
	}
	// The loops and the roles' parts first, in reverse order.
	errs = append(errs, n.group.Stop(sctx))
	if n.gateway != nil {
		n.gateway.Close()
	}
	errs = append(errs, n.admission.close())
	if n.dataClient != nil {
		errs = append(errs, n.dataClient.Close())
	}
	if n.dataRng != nil {
		n.dataRng.Close()
	}
	if n.bots != nil {
		errs = append(errs, n.bots.Close())
	}
	if n.botStore != nil {
		errs = append(errs, n.botStore.Close())
	}
	errs = append(errs, n.pub.close())
	if n.identify != nil {
		errs = append(errs, n.identify.Close())
	}
	if n.rlCounters != nil {
		errs = append(errs, n.rlCounters.Close())
	}
	// The rings and clients the roles shared, and the chat roles'
	// services (the guild service among them).
	errs = append(errs, n.seams.Close())
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
