// Package platform assembles Concord's roles into one running process:
// storage, id minting, auth, guild actors, the gateway and the REST API on
// one HTTP listener, with /metrics, /healthz and /readyz beside them.
// `concord dev` runs every role with embedded backends; later issues add
// the real backends and split the roles across processes.
package platform

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/httpserve"
)

// Config is the root configuration of a Concord process. Each part gets
// only its own sub-struct when the platform is wired.
type Config struct {
	// HTTP is the listen address for REST, the gateway and the
	// operational endpoints. Default 127.0.0.1:8080.
	HTTP string
	// DataDir holds embedded data (the Pebble store, the server key).
	// Default ./.concord-data.
	DataDir string
	// Store selects the storage backend: "pebble:DIR" (default
	// pebble:<DataDir>/store) or "cassandra://host:port/keyspace".
	Store string
	// EventLog selects the event log: "mem" (default) or
	// "kafka://host:port".
	EventLog string
	// Redis selects the counters backend: "mem" (default) or
	// "redis://host:port".
	Redis string
	// CassandraUsername and CassandraPassword log in to a cassandra://
	// store (PasswordAuthenticator) when the username is set. A user or
	// password in the Store URL wins; each is filled from here only when
	// the URL left it empty. Default none.
	CassandraUsername, CassandraPassword string
	// RedisPassword authenticates to a redis:// counters backend
	// (requirepass, or the ACL user the URL names). The URL's own password
	// wins when it has one. Default none.
	RedisPassword string
	// KafkaUsername and KafkaPassword authenticate to a kafka:// event log
	// with SASL when the username is set; a user or password in the
	// EventLog URL wins. KafkaSASLMechanism is PLAIN (default),
	// SCRAM-SHA-256 or SCRAM-SHA-512. KafkaTLS dials the brokers over TLS.
	// Default none.
	KafkaUsername, KafkaPassword string
	KafkaSASLMechanism           string
	KafkaTLS                     bool
	// Registry selects the registry: "embedded" (default) or
	// "etcd://host:port".
	Registry string
	// Node names this process in the registry and in gateway sessions.
	// Default "node-1".
	Node string
	// Worker and Process are the snowflake worker and process ids (0..31).
	Worker, Process int
	// PublicURL is the gateway URL handed to clients (resume_gateway_url,
	// /gateway). Empty: derived from each request's Host header.
	PublicURL string
	// ReadStateGroup is the read-state role's consumer group on the event
	// log. Default "readstate"; processes sharing a Kafka that must not
	// split its partitions between them (tests) set their own.
	ReadStateGroup string
	// EgressProxy is the egress deployment (`concord egress`,
	// http://host:port) every call to a bot-chosen URL goes through.
	// Empty: the in-process egress client checks and dials itself.
	EgressProxy string
	// ServerKey signs tokens (≥ 32 bytes). Empty: read from
	// <DataDir>/server.key, created on first start.
	ServerKey string
	// IdentifyConcurrency is the bots' session_start_limit.max_concurrency:
	// identifies admitted per 5 s, one bucket per shard_id %
	// IdentifyConcurrency. Default 1.
	IdentifyConcurrency int
	// DevUser creates a "dev" user on first start and prints its token.
	DevUser bool
	// ShutdownTimeout bounds a graceful shutdown. Default 10 s.
	ShutdownTimeout time.Duration
	// PermissionsShadowEvery samples one fan-out or read permission
	// decision of the guild actors in N and recomputes it from scratch
	// (concord_permissions_shadow_*). 0 takes 1000; negative disables.
	PermissionsShadowEvery int
	// Logger receives every component's logs. Default slog.Default().
	Logger *slog.Logger
	// Presence tunes the presence role (presence.go).
	Presence PresenceConfig
	// Entitlements tunes bot revocation: lease TTL and outage grace
	// (entitlements.go).
	Entitlements EntitlementConfig
	// Serving bounds every HTTP listener: timeouts, header size and
	// connection caps (zero fields take httpserve's defaults).
	Serving httpserve.Config
	// AdminToken is the credential /admin/... requires (adminauth). In
	// `concord dev` the admin endpoints are off unless it is set; `concord
	// serve` derives one from the server key when it is empty.
	AdminToken string
}

// DefaultConfig returns the configuration of `concord dev`.
func DefaultConfig() Config {
	return Config{
		HTTP:            "127.0.0.1:8080",
		DataDir:         "./.concord-data",
		EventLog:        "mem",
		Redis:           "mem",
		Registry:        "embedded",
		Node:            "node-1",
		DevUser:         true,
		ShutdownTimeout: 10 * time.Second,
	}
}

// withDefaults fills empty fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.HTTP == "" {
		c.HTTP = d.HTTP
	}
	if c.DataDir == "" {
		c.DataDir = d.DataDir
	}
	if c.Store == "" {
		c.Store = "pebble:" + filepath.Join(c.DataDir, "store")
	}
	if c.EventLog == "" {
		c.EventLog = d.EventLog
	}
	if c.Redis == "" {
		c.Redis = d.Redis
	}
	if c.Registry == "" {
		c.Registry = d.Registry
	}
	if c.Node == "" {
		c.Node = d.Node
	}
	if c.IdentifyConcurrency <= 0 {
		c.IdentifyConcurrency = 1
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Worker < 0 || c.Worker > 31 || c.Process < 0 || c.Process > 31 {
		return c, fmt.Errorf("platform: worker and process must be in 0..31, got %d and %d", c.Worker, c.Process)
	}
	if c.EgressProxy != "" {
		if u, err := url.Parse(c.EgressProxy); err != nil || u.Scheme != "http" || u.Host == "" {
			return c, fmt.Errorf("platform: egress proxy %q must be http://host:port", c.EgressProxy)
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.RawQuery != "" {
			return c, fmt.Errorf("platform: public URL %q must be ws:// or wss:// without a query", c.PublicURL)
		}
	}
	return c, nil
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

// backendScheme splits "scheme:rest" or "scheme://rest" URLs of the
// backend flags.
func backendScheme(s string) (scheme, rest string) {
	if i := strings.Index(s, "://"); i >= 0 {
		return s[:i], s[i+3:]
	}
	if i := strings.Index(s, ":"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}
