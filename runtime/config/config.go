// Package config is the one typed configuration of a Concord process.
// `concord dev` and `concord serve` fill the same Config from their flags
// and environment; every role reads its part of it. Defaults live here and
// nowhere else: Default returns them and Complete fills a partial Config
// with them, so a zero field means "the default" everywhere.
package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/edge/httpserve"
	"github.com/concord-chat/concord/web"
)

// Where message reads and writes go (Config.DataNodes).
const (
	// DataLocal: each process calls the store directly (through its own
	// coalescing data service when the store is Cassandra).
	DataLocal = "local"
	// DataRing: each process sends them to the data-role node owning the
	// channel on the ring of live data nodes.
	DataRing = "ring"
)

// Config is the configuration of one Concord process. Zero fields take
// the defaults Default states.
type Config struct {
	// Roles this process runs. Empty or every role with embedded
	// backends is `concord dev`; `concord serve --roles=...` names a
	// subset.
	Roles []string

	// HTTP is the listen address for REST, the gateway and the
	// operational endpoints. Default 127.0.0.1:8080.
	HTTP string
	// GRPC is the listen address of the gRPC server between processes.
	// Default 127.0.0.1:0.
	GRPC string
	// Admin is the listen address of the admin endpoint (/admin/...,
	// plus /metrics, /healthz and /readyz), kept off the public
	// listener. Empty serves /admin/... on the HTTP listener.
	Admin string
	// AdvertiseHost replaces the host of the listen addresses in the
	// registry (for listeners on 0.0.0.0). Default: the listener's host.
	AdvertiseHost string
	// PublicURL is the gateway URL handed to clients (resume_gateway_url,
	// /gateway, /gateway/bot). Empty: derived from each request's Host.
	PublicURL string
	// WebMediaOrigins are origins besides the page's own that the web
	// client's <video> may play live streams' stream_url from (its CSP
	// media-src).
	WebMediaOrigins []string

	// DataDir holds embedded data (the Pebble store, the server key, the
	// outbox). Default ./.concord-data.
	DataDir string
	// Store selects the storage backend: "pebble:DIR" (default
	// pebble:<DataDir>/store) or "cassandra://host:port/keyspace".
	Store string
	// EventLog selects the event log: "mem" (default, persisted in
	// DataDir) or "kafka://host:port".
	EventLog string
	// Redis selects the counters backend: "mem" (default) or
	// "redis://host:port".
	Redis string
	// Registry selects the registry: "embedded" (default) or
	// "etcd://host:port[,host:port...][/prefix]".
	Registry string
	// Credentials log in to the backends above.
	Credentials

	// Node names this process in the registry and in gateway sessions.
	// Default "node-1".
	Node string
	// Worker and Process are the snowflake worker and process ids (0..31).
	Worker, Process int
	// SnowflakeAuto makes the process claim a free worker/process pair in
	// the registry instead of Worker and Process.
	SnowflakeAuto bool
	// ServerKey signs tokens (≥ 32 bytes), shared by every process of a
	// cluster. Empty: read from <DataDir>/server.key, created on first
	// start.
	ServerKey string
	// EgressProxy is the egress deployment (`concord egress`,
	// http://host:port) every call to a bot-chosen URL goes through.
	// Empty: the in-process egress client checks and dials itself.
	EgressProxy string
	// Objects is where attachments are stored: dir:PATH (default
	// dir:<DataDir>/objects) or an S3-compatible bucket,
	// s3://KEY:SECRET@host:port/bucket[/prefix] (s3+http:// without TLS).
	Objects string
	// MaxFileBytes caps each uploaded file (0: 25 MiB).
	MaxFileBytes int64
	// DevUser creates a "dev" user on first start and prints its token.
	DevUser bool
	// AdminToken is the credential /admin/... requires (adminauth). In
	// `concord dev` the admin endpoints are off unless it is set; `concord
	// serve` derives one from the server key when it is empty.
	AdminToken string
	// PermissionsShadowEvery samples one fan-out or read permission
	// decision of the guild actors in N and recomputes it from scratch
	// (concord_permissions_shadow_*). 0 takes 1000; negative disables.
	PermissionsShadowEvery int
	// GuildMetricsTop is how many of the busiest guilds a guild node
	// gives labelled event-age and mailbox series
	// (concord_guild_top_*{guild}); 0 takes 20, negative turns them off.
	GuildMetricsTop int
	// RelayThreshold is the number of online sessions above which a
	// guild hands its sessions to relays that filter their slices
	// (runtime/domain/guild/sliced.go); 0 takes 15,000.
	RelayThreshold int
	// DevRelays is the number of in-process relays of `concord dev`
	// (runtime/domain/fanout.Local); 0 runs none.
	DevRelays int
	// Serving bounds every HTTP listener: timeouts, header size,
	// connection caps (zero fields take httpserve's defaults) and the
	// trusted proxies whose word about the client's address is believed.
	Serving httpserve.Config

	// LeaseTTL is how long a dead process stays in the registry, hence
	// about how long its guilds are unavailable. Default 5 s.
	LeaseTTL time.Duration
	// RetryInterval is how often gateways retry failed subscriptions and
	// guild nodes unload guilds placed elsewhere. Default 1 s.
	RetryInterval time.Duration
	// CallTimeout bounds each gRPC call between processes. Default 5 s.
	CallTimeout time.Duration
	// ShutdownTimeout bounds a graceful shutdown. Default 10 s.
	ShutdownTimeout time.Duration
	// DataNodes is where message reads and writes go: DataLocal
	// (default) or DataRing.
	DataNodes string
	// NoRateLimits turns the REST rate limits off: for load tests and
	// trusted internal callers only.
	NoRateLimits bool

	// ReadStateGroup is the read-state consumer group on the event log.
	// Default "readstate"; processes sharing a Kafka that must not split
	// its partitions between them (tests) set their own.
	ReadStateGroup string
	// ReadStateFlush is how long a read-state change may stay only in
	// memory before it is written to the table. Default 30 s.
	ReadStateFlush time.Duration

	// Identify is the gateway's identify admission.
	Identify Identify
	// Tracing is where the process's OpenTelemetry spans go (off unless
	// an endpoint and a sample share are set).
	Tracing tracing.Config
	// Presence tunes presence, member lists and typing focus.
	Presence Presence
	// Entitlements tunes bot revocation.
	Entitlements Entitlements
	// Pod holds the operator's settings for the process.
	Pod Pod
	// Live configures the live-comment roles.
	Live Live
	// Voice configures the voice role (the SFU) and the guild's voice
	// admission tokens.
	Voice Voice

	// Logger receives every component's logs. Default slog.Default().
	Logger *slog.Logger

	// FaultClockFile, for fault testing only, moves this process's wall
	// clock (runtime/base/clock) by the offset the file holds ("+45s",
	// "-45s"; absent or empty is 0), read at start and every 100 ms
	// after. Empty (the default) leaves the clock alone and reads no file.
	FaultClockFile string
}

// Credentials authenticate to the backends. A user or password written in
// a backend's URL wins; a field the URL leaves empty is filled from here.
type Credentials struct {
	// CassandraUsername and CassandraPassword log in to a cassandra://
	// store (PasswordAuthenticator) when the username is set.
	CassandraUsername, CassandraPassword string
	// RedisPassword authenticates to a redis:// counters backend.
	RedisPassword string
	// KafkaUsername and KafkaPassword authenticate to a kafka:// event log
	// with SASL when the username is set. KafkaSASLMechanism is PLAIN
	// (default), SCRAM-SHA-256 or SCRAM-SHA-512. KafkaTLS dials the
	// brokers over TLS.
	KafkaUsername, KafkaPassword string
	KafkaSASLMechanism           string
	KafkaTLS                     bool
}

// Identify is the gateway's identify admission: a process-wide token
// bucket in front of every IDENTIFY and the bots' per-bot limits counted
// in the counters backend. An identify over either gets op 9 d:false;
// RESUME is never throttled.
type Identify struct {
	// Rate is how many identifies per second the process admits; 0 (the
	// default) turns the process throttle off.
	Rate float64
	// Burst is how many identifies are admitted at once after a quiet
	// spell. Default max(1, Rate).
	Burst int
	// Concurrency is the bots' session_start_limit.max_concurrency:
	// identifies admitted per 5 s, one bucket per shard_id % Concurrency.
	// Default 1.
	Concurrency int
}

// Presence tunes presence. In `concord dev` it is always on; in `concord
// serve` gateway and guild processes take part when Enabled (on by itself
// for a process running the presence role).
type Presence struct {
	// Enabled turns presence, member lists (op 8, op 14) and focused
	// typing on in `concord serve`.
	Enabled bool
	// Window is the coalescing window of status changes. Default 5 s.
	Window time.Duration
	// ReportInterval is how often gateways re-report their sessions to
	// the presence role. Default 15 s. The presence role forgets a
	// gateway's sessions after three intervals without a report, and a
	// fresh presence role absorbs re-reports silently for two.
	ReportInterval time.Duration
	// TickInterval is how often the presence role broadcasts due changes
	// (default: a quarter of Window); negative runs no ticker (tests call
	// tick).
	TickInterval time.Duration
	// Now is the presence role's clock (default time.Now).
	Now func() time.Time
}

// Entitlements tunes revocation with a deadline. Zero fields take the
// stated defaults.
type Entitlements struct {
	// TTL is a bot's entitlement lease (default 10 s): the longest a
	// revocation whose push was lost goes unapplied while the bot store
	// answers. Leases are renewed every TTL/2.
	TTL time.Duration
	// RetryEvery is the time between renewal attempts that failed
	// (default 1 s).
	RetryEvery time.Duration
	// Grace is how long a bot's sessions keep running past a lease that
	// cannot be renewed (bot store or registry down) before they close
	// (default 5 min).
	Grace time.Duration
}

// Pod is what the operator tells a process about its place in the fleet,
// through the environment of the pods it creates (CONCORD_CLUSTER,
// CONCORD_GATEWAY_*, CONCORD_GUILD_DEDICATED). Zero fields are unset.
type Pod struct {
	// Cluster is the name of the ConcordCluster the process belongs to.
	Cluster string
	// GatewayPool is the GatewayPool of a gateway process.
	GatewayPool string
	// ClientClass is the pool's client class, e.g. bots or users.
	ClientClass string
	// SessionsTarget is the number of sessions the pool sizes each
	// gateway for.
	SessionsTarget int
	// DedicatedGuild makes a guild process dedicated to one guild (a
	// GuildPlacement): the ring gives it no other guild.
	DedicatedGuild snowflake.ID
}

// Live configures the live-comment roles (live-api, live-gateway,
// live-router, live-archiver). They run on --eventlog, --redis and
// --store: in `concord dev` the embedded defaults under DataDir/live, in
// `concord serve` Kafka, Redis and Cassandra.
type Live struct {
	// Prefix names the event log topics (<Prefix>comments and
	// <Prefix>reactions) and consumer groups (<Prefix>router,
	// <Prefix>reactions, <Prefix>archiver) and prefixes the Redis keys
	// and channels, so deployments can share servers. Default
	// "concord.live.".
	Prefix string
	// MaxViewers bounds one gateway's SSE connections; past it a viewer
	// gets 503 with Retry-After. Default 100,000.
	MaxViewers int
	// MaxPending bounds the bytes queued for one viewer; a slower viewer
	// is cut and reconnects with Last-Event-ID. Default 256 KiB.
	MaxPending int
	// FlushInterval is the shortest time between two writes to one
	// viewer. Default 250 ms.
	FlushInterval time.Duration
	// PingInterval is the time between SSE ": ping" lines. Default 15 s.
	PingInterval time.Duration
	// ReportInterval is how often each gateway reports its viewer counts
	// and sends viewers events. Default 5 s.
	ReportInterval time.Duration
	// Relay is how the router's batches reach the gateways: "tree" (the
	// relay tree of the live-relay nodes), "redis" (pub/sub on --redis;
	// in one process, in process). Empty: "tree" in a process running
	// live-relay beside every role (`concord dev`), "redis" otherwise.
	Relay string
	// RelayListen is the listen address of a live-relay node's relay
	// protocol (advertised with AdvertiseHost). Default 127.0.0.1:0.
	RelayListen string
	// Classifier is the live-moderation role's classifier: "linear" (the
	// Go model shipped in the binary), "off" (the role scores nothing),
	// or a KServe v2 / Triton server as http(s)://host:port/MODEL.
	// Default "linear".
	Classifier string
}

// DefaultLivePrefix is Live.Prefix's default.
const DefaultLivePrefix = "concord.live."

// Voice configures the voice role: one SFU (runtime/domain/voice) speaking
// Discord's voice gateway over TLS and RTP over UDP. Zero fields take the
// defaults stated.
type Voice struct {
	// Listen is the voice gateway's listen address. Default 127.0.0.1:0.
	Listen string
	// UDP is the media socket's listen address. Default: Listen's host,
	// port 0.
	UDP string
	// WebRTCUDP is the listen address of the browsers' WebRTC media (one
	// ICE UDP port shared by every peer connection). Default: Listen's
	// host, port 0; "off" turns the WebRTC transport off.
	WebRTCUDP string
	// PublicHost is the host of the endpoint clients are sent to
	// (VOICE_SERVER_UPDATE). Default: Listen's host, 127.0.0.1 when it is
	// unspecified.
	PublicHost string
	// PublicIP is the IPv4 address clients send media to (voice Ready).
	// Default: PublicHost when it is an IPv4 address, else the UDP
	// socket's.
	PublicIP string
	// Region is the server's voice region. Default "local".
	Region string
	// ID names the server in tokens and load reports. Default: Node.
	ID string
	// TLS is how the voice gateway serves TLS (libraries dial wss://):
	// "devca" with a certificate from the CA written to
	// <DataDir>/voice-ca.pem, "off" behind a TLS-terminating proxy.
	// Default devca in `concord dev`, off in `concord serve`.
	TLS string
	// TokenKey is the hex Ed25519 seed (32 bytes) the guild signs voice
	// admission tokens with. Empty: in `concord dev`
	// <DataDir>/voice-token.key, created on first start; in `concord
	// serve` derived from ServerKey.
	TokenKey string
	// TrustedKeys are the hex Ed25519 public keys an SFU accepts tokens
	// from (comma-separated on the command line). Empty: TokenKey's.
	TrustedKeys []string
	// ICEServers are STUN/TURN server URLs handed to WebRTC clients
	// (browsers behind NAT relay through TURN), with ICEUsername and
	// ICECredential as the TURN credentials.
	ICEServers                 []string
	ICEUsername, ICECredential string
	// ICESecret is the TURN servers' shared secret (coturn's
	// static-auth-secret with use-auth-secret): with it each voice session
	// is handed its own time-limited credential instead of ICEUsername and
	// ICECredential.
	ICESecret string
	// ICECredentialTTL is how long a minted TURN credential is valid (0:
	// 12 h).
	ICECredentialTTL time.Duration
}

// ServingConfig is Serving with the process logger: the bounds of every
// HTTP listener of the process.
func (c Config) ServingConfig() httpserve.Config {
	s := c.Serving
	if s.Logger == nil {
		s.Logger = c.Logger
	}
	return s
}

// DefaultReportInterval is Presence.ReportInterval's default.
const DefaultReportInterval = 15 * time.Second

// Default returns the defaults of every setting.
func Default() Config {
	return Config{
		HTTP:            "127.0.0.1:8080",
		GRPC:            "127.0.0.1:0",
		DataDir:         "./.concord-data",
		EventLog:        "mem",
		Redis:           "mem",
		Registry:        "embedded",
		Node:            "node-1",
		LeaseTTL:        5 * time.Second,
		RetryInterval:   time.Second,
		CallTimeout:     5 * time.Second,
		ShutdownTimeout: 10 * time.Second,
		DataNodes:       DataLocal,
		ReadStateGroup:  "readstate",
		ReadStateFlush:  30 * time.Second,
		Identify:        Identify{Concurrency: 1},
		Presence:        Presence{Window: 5 * time.Second, ReportInterval: DefaultReportInterval},
		Entitlements:    Entitlements{TTL: 10 * time.Second, RetryEvery: time.Second, Grace: 5 * time.Minute},
		Credentials:     Credentials{KafkaSASLMechanism: "PLAIN"},
		Live: Live{Prefix: DefaultLivePrefix, MaxViewers: 100_000, MaxPending: 256 << 10, FlushInterval: 250 * time.Millisecond, PingInterval: 15 * time.Second, ReportInterval: 5 * time.Second,
			RelayListen: "127.0.0.1:0", Classifier: "linear"},
	}
}

// Complete returns c with every zero field set to its default, and an
// error for a setting that cannot be right whatever the roles.
func (c Config) Complete() (Config, error) {
	d := Default()
	str := func(p *string, def string) {
		if *p == "" {
			*p = def
		}
	}
	dur := func(p *time.Duration, def time.Duration) {
		if *p <= 0 {
			*p = def
		}
	}
	str(&c.HTTP, d.HTTP)
	str(&c.GRPC, d.GRPC)
	str(&c.DataDir, d.DataDir)
	str(&c.Store, "pebble:"+filepath.Join(c.DataDir, "store"))
	str(&c.Objects, "dir:"+filepath.Join(c.DataDir, "objects"))
	str(&c.EventLog, d.EventLog)
	str(&c.Redis, d.Redis)
	str(&c.Registry, d.Registry)
	str(&c.Node, d.Node)
	str(&c.DataNodes, d.DataNodes)
	str(&c.ReadStateGroup, d.ReadStateGroup)
	str(&c.KafkaSASLMechanism, d.KafkaSASLMechanism)
	dur(&c.LeaseTTL, d.LeaseTTL)
	dur(&c.RetryInterval, d.RetryInterval)
	dur(&c.CallTimeout, d.CallTimeout)
	dur(&c.ShutdownTimeout, d.ShutdownTimeout)
	dur(&c.ReadStateFlush, d.ReadStateFlush)
	dur(&c.Presence.Window, d.Presence.Window)
	dur(&c.Presence.ReportInterval, d.Presence.ReportInterval)
	dur(&c.Entitlements.TTL, d.Entitlements.TTL)
	dur(&c.Entitlements.RetryEvery, d.Entitlements.RetryEvery)
	dur(&c.Entitlements.Grace, d.Entitlements.Grace)
	str(&c.Live.Prefix, d.Live.Prefix)
	dur(&c.Live.FlushInterval, d.Live.FlushInterval)
	dur(&c.Live.PingInterval, d.Live.PingInterval)
	dur(&c.Live.ReportInterval, d.Live.ReportInterval)
	str(&c.Live.RelayListen, d.Live.RelayListen)
	str(&c.Live.Classifier, d.Live.Classifier)
	if c.Live.MaxViewers <= 0 {
		c.Live.MaxViewers = d.Live.MaxViewers
	}
	if c.Live.MaxPending <= 0 {
		c.Live.MaxPending = d.Live.MaxPending
	}
	if c.Identify.Concurrency <= 0 {
		c.Identify.Concurrency = d.Identify.Concurrency
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Worker < 0 || c.Worker > 31 || c.Process < 0 || c.Process > 31 {
		return c, fmt.Errorf("config: worker and process must be in 0..31, got %d and %d", c.Worker, c.Process)
	}
	if c.Identify.Rate < 0 || c.Identify.Burst < 0 {
		return c, fmt.Errorf("config: --identify-rate %v and --identify-burst %d must not be negative", c.Identify.Rate, c.Identify.Burst)
	}
	if c.Pod.SessionsTarget < 0 {
		return c, fmt.Errorf("config: --gateway-sessions-target %d is negative", c.Pod.SessionsTarget)
	}
	switch c.DataNodes {
	case DataLocal, DataRing:
	default:
		return c, fmt.Errorf("config: unknown --data-nodes %q (want %s or %s)", c.DataNodes, DataLocal, DataRing)
	}
	if c.EgressProxy != "" {
		if u, err := url.Parse(c.EgressProxy); err != nil || u.Scheme != "http" || u.Host == "" {
			return c, fmt.Errorf("config: egress proxy %q must be http://host:port", c.EgressProxy)
		}
	}
	if len(c.WebMediaOrigins) > 0 {
		o, err := web.ParseOrigins(strings.Join(c.WebMediaOrigins, ","), "http", "https")
		if err != nil {
			return c, fmt.Errorf("config: --web-media-origins: %w", err)
		}
		c.WebMediaOrigins = o
	}
	if err := c.Serving.Validate(); err != nil {
		return c, fmt.Errorf("config: --trusted-proxies: %w", err)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.RawQuery != "" {
			return c, fmt.Errorf("config: public URL %q must be ws:// or wss:// without a query", c.PublicURL)
		}
	}
	return c, nil
}
