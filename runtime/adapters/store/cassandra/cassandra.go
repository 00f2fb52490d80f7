// Package cassandra is Concord's production store: store.Store on Apache
// Cassandra or ScyllaDB (same CQL), through the Apache Cassandra Go driver
// (github.com/apache/cassandra-gocql-driver/v2, the maintained home of
// gocql).
//
// Layout. Messages live in messages((channel_id, bucket), message_id) with
// message_id clustered descending, so the newest page of a channel is the
// head of one partition. A message's bucket is its snowflake's millisecond
// timestamp divided by the channel's bucket width (store.Bucket); widths are
// per channel, recorded in channel_bucket_widths with the message id they
// apply from, and only ever narrow, so bucket numbers grow with message ids
// and old rows never move (buckets.go). channel_buckets lists each
// channel's non-empty buckets so scroll-back skips gaps. Guild state and
// accounts live in small tables keyed by their ids (guilds.go, users.go).
// The schema is created and migrated at start (schema.go).
//
// Consistency. Reads and writes run at Config.Consistency (LOCAL_QUORUM by
// default); username claims use lightweight transactions at LOCAL_SERIAL.
// A write that returns nil was acknowledged by a quorum of replicas.
//
// Errors. Driver errors never leave this package: server unavailability,
// timeouts and lost connections are wrapped as store.ErrUnavailable, missing
// rows as store.ErrNotFound, and anything else carries the driver's text
// only.
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// Config configures a Store. The zero value of every field means its
// default.
type Config struct {
	// Hosts are the contact points, "host" or "host:port". Default:
	// ["127.0.0.1:9042"]. The driver discovers the rest of the cluster.
	Hosts []string
	// Keyspace holds every table. Default: "concord". It is created when
	// missing, with ReplicationFactor (and DataCenter).
	Keyspace string
	// Consistency of every read and write: ONE, LOCAL_ONE, QUORUM,
	// LOCAL_QUORUM, EACH_QUORUM or ALL. Default: LOCAL_QUORUM.
	Consistency string
	// ReplicationFactor of a keyspace this store creates. Default: the
	// number of nodes the cluster reports at first start, at most 3. An
	// existing keyspace is never altered.
	ReplicationFactor int
	// DataCenter, when set, creates the keyspace with
	// NetworkTopologyStrategy {DataCenter: ReplicationFactor} and prefers
	// its nodes; otherwise SimpleStrategy. Default: "".
	DataCenter string
	// Timeout bounds each request on the client. Default: 10s.
	Timeout time.Duration
	// ConnectTimeout bounds dialing and the connection handshake. Default: 10s.
	ConnectTimeout time.Duration
	// NumConns is the number of connections per host. Default: 2.
	NumConns int
	// PageSize is the driver's page size for scans (bucket lists, guild
	// loads). Default: 500.
	PageSize int
	// DefaultBucketWidth is the width of channels that were never
	// narrowed. Default: store.DefaultBucketWidth (10 days). It must not
	// change for an existing keyspace: it decides where old rows live.
	DefaultBucketWidth time.Duration
	// WidthCacheTTL is how long a channel's bucket widths are cached in
	// process. A narrowing takes effect from a message id at least three
	// TTLs in the future, so every process sees it before it applies.
	// Default: 10s.
	WidthCacheTTL time.Duration
	// Narrowing configures automatic bucket narrowing (narrow.go).
	Narrowing NarrowingConfig
	// Username and Password log in with the driver's PasswordAuthenticator
	// (Cassandra's PasswordAuthenticator, ScyllaDB's) when Username is set.
	// Default none (AllowAllAuthenticator clusters). The password never
	// appears in String, logs or errors.
	Username, Password string
	// Logger receives the store's and the driver's log lines. Default:
	// slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the configuration New uses for zero fields.
func DefaultConfig() Config {
	return Config{
		Hosts:              []string{"127.0.0.1:9042"},
		Keyspace:           "concord",
		Consistency:        "LOCAL_QUORUM",
		Timeout:            10 * time.Second,
		ConnectTimeout:     10 * time.Second,
		NumConns:           2,
		PageSize:           500,
		DefaultBucketWidth: store.DefaultBucketWidth,
		WidthCacheTTL:      10 * time.Second,
		Narrowing:          DefaultNarrowingConfig(),
	}
}

// ParseURL reads a store URL of the form
//
//	cassandra://host[:port][,host2[:port]...]/keyspace[?consistency=ONE&rf=1&dc=dc1&timeout=5s]
//
// into a Config (fields not in the URL keep their zero value, so New fills
// the defaults). "scylla://" is accepted as a synonym. A
// "user:password@" (percent-encoded) before the hosts sets Username and
// Password; errors name the URL with the password redacted.
func ParseURL(raw string) (Config, error) {
	var cfg Config
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "cassandra" && scheme != "scylla") {
		return cfg, fmt.Errorf("%w: %q, want cassandra://host:port/keyspace", ErrConfig, RedactURL(raw))
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.ContainsAny(rest[:at], "/?") {
		user, pass, hasPass := strings.Cut(rest[:at], ":")
		var err error
		if cfg.Username, err = url.PathUnescape(user); err != nil || cfg.Username == "" {
			return cfg, fmt.Errorf("%w: bad user name in %q", ErrConfig, RedactURL(raw))
		}
		if hasPass {
			if cfg.Password, err = url.PathUnescape(pass); err != nil {
				return cfg, fmt.Errorf("%w: bad password in %q", ErrConfig, RedactURL(raw))
			}
		}
		raw = RedactURL(raw)
		rest = rest[at+1:]
	}
	// The host list may hold several host:port entries, which net/url
	// does not accept: split it off first.
	hosts := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hosts, rest = rest[:i], rest[i:]
	} else {
		rest = ""
	}
	if hosts == "" {
		return cfg, fmt.Errorf("%w: %q names no host", ErrConfig, raw)
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return cfg, fmt.Errorf("%w: empty host in %q", ErrConfig, raw)
		}
		cfg.Hosts = append(cfg.Hosts, h)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return cfg, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	cfg.Keyspace = strings.Trim(u.Path, "/")
	q := u.Query()
	if v := q.Get("consistency"); v != "" {
		cfg.Consistency = strings.ToUpper(v)
	}
	if v := q.Get("rf"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("%w: rf=%q", ErrConfig, v)
		}
		cfg.ReplicationFactor = n
	}
	cfg.DataCenter = q.Get("dc")
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("%w: timeout=%q", ErrConfig, v)
		}
		cfg.Timeout = d
	}
	return cfg, cfg.validate()
}

// RedactURL returns a store URL with the password of its
// "user:password@" part replaced by "xxxxx", for logs and errors.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 || strings.ContainsAny(rest[:at], "/?") {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}

// String describes the configuration for logs, the password redacted.
func (c Config) String() string {
	pw := ""
	if c.Password != "" {
		pw = "xxxxx"
	}
	return fmt.Sprintf("cassandra hosts=%s keyspace=%s consistency=%s username=%s password=%s",
		strings.Join(c.Hosts, ","), c.Keyspace, c.Consistency, c.Username, pw)
}

// LogValue implements slog.LogValuer with the password redacted.
func (c Config) LogValue() slog.Value {
	pw := ""
	if c.Password != "" {
		pw = "xxxxx"
	}
	return slog.GroupValue(slog.String("hosts", strings.Join(c.Hosts, ",")), slog.String("keyspace", c.Keyspace),
		slog.String("consistency", c.Consistency), slog.String("username", c.Username), slog.String("password", pw))
}

// authenticator returns the driver's authenticator for c's credentials:
// nil (none) without a username.
func (c Config) authenticator() gocql.Authenticator {
	if c.Username == "" {
		return nil
	}
	return gocql.PasswordAuthenticator{Username: c.Username, Password: c.Password}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if len(c.Hosts) == 0 {
		c.Hosts = d.Hosts
	}
	if c.Keyspace == "" {
		c.Keyspace = d.Keyspace
	}
	if c.Consistency == "" {
		c.Consistency = d.Consistency
	}
	if c.Timeout <= 0 {
		c.Timeout = d.Timeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.NumConns <= 0 {
		c.NumConns = d.NumConns
	}
	if c.PageSize <= 0 {
		c.PageSize = d.PageSize
	}
	if c.DefaultBucketWidth <= 0 {
		c.DefaultBucketWidth = d.DefaultBucketWidth
	}
	if c.WidthCacheTTL <= 0 {
		c.WidthCacheTTL = d.WidthCacheTTL
	}
	c.Narrowing = c.Narrowing.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.Keyspace != "" && !validIdent(c.Keyspace) {
		return fmt.Errorf("%w: keyspace %q (letters, digits and _, at most 48)", ErrConfig, c.Keyspace)
	}
	if c.Consistency != "" {
		if _, err := gocql.ParseConsistencyWrapper(c.Consistency); err != nil {
			return fmt.Errorf("%w: consistency %q", ErrConfig, c.Consistency)
		}
	}
	if c.Password != "" && c.Username == "" {
		return fmt.Errorf("%w: a password without a username", ErrConfig)
	}
	if c.DefaultBucketWidth != 0 && c.DefaultBucketWidth < time.Millisecond {
		return fmt.Errorf("%w: DefaultBucketWidth %v below 1ms", ErrConfig, c.DefaultBucketWidth)
	}
	for _, h := range c.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil && strings.Contains(h, ":") && !strings.Contains(h, "]") {
			return fmt.Errorf("%w: host %q", ErrConfig, h)
		}
	}
	return nil
}

// validIdent reports whether s is a safe unquoted CQL identifier.
func validIdent(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Store is store.Store on Cassandra. It is safe for concurrent use.
type Store struct {
	cfg     Config
	log     *slog.Logger
	session *gocql.Session
	widths  *widthCache
	narrow  *narrower
	obs     *observer
}

var _ store.Store = (*Store)(nil)

// New connects to the cluster, creates the keyspace when missing, applies
// pending schema migrations (safe to run from many processes at once) and
// returns a ready Store. When no node answers it fails with an error
// wrapping store.ErrUnavailable; callers retry with backoff (see
// Connect).
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cons, _ := gocql.ParseConsistencyWrapper(cfg.Consistency)
	log := cfg.Logger.With("component", "cassandra", "keyspace", cfg.Keyspace)
	obs := &observer{hot: newHotPartitions(64)}

	cluster := func(keyspace string) *gocql.ClusterConfig {
		c := gocql.NewCluster(cfg.Hosts...)
		c.Keyspace = keyspace
		c.Consistency = cons
		c.SerialConsistency = gocql.LocalSerial
		c.Timeout = cfg.Timeout
		c.ConnectTimeout = cfg.ConnectTimeout
		c.NumConns = cfg.NumConns
		c.PageSize = cfg.PageSize
		c.Authenticator = cfg.authenticator()
		c.Logger = slogAdapter{log}
		c.QueryObserver = obs
		c.BatchObserver = obs
		// Lost connections are redialled with backoff, and hosts marked
		// down are retried every 5s, so the store recovers within seconds
		// of the cluster coming back.
		c.ReconnectionPolicy = &gocql.ExponentialReconnectionPolicy{MaxRetries: 8,
			InitialInterval: 250 * time.Millisecond, MaxInterval: 5 * time.Second}
		c.ReconnectInterval = 5 * time.Second
		// Token-aware routing: each statement goes to a replica of its
		// partition, falling back to round robin (within DataCenter if
		// set). A policy belongs to one session.
		fallback := gocql.RoundRobinHostPolicy()
		if cfg.DataCenter != "" {
			fallback = gocql.DCAwareRoundRobinPolicy(cfg.DataCenter)
		}
		c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback, gocql.ShuffleReplicas())
		return c
	}

	// First a session without keyspace to create it, then the real one.
	boot, err := cluster("").CreateSession()
	if err != nil {
		return nil, wrapErr("connect to "+strings.Join(cfg.Hosts, ","), err)
	}
	err = ensureKeyspace(ctx, boot, cfg, log)
	boot.Close()
	if err != nil {
		return nil, err
	}
	// A node busy with schema changes may time out handshakes: retry a
	// few times before giving up.
	var session *gocql.Session
	for attempt := 1; ; attempt++ {
		session, err = cluster(cfg.Keyspace).CreateSession()
		if err == nil {
			break
		}
		if attempt == 3 || ctx.Err() != nil {
			return nil, wrapErr("connect to keyspace "+cfg.Keyspace, err)
		}
		log.Warn("connect to keyspace failed, retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, wrapErr("connect to keyspace "+cfg.Keyspace, ctx.Err())
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
	s := &Store{cfg: cfg, log: log, session: session, obs: obs}
	s.widths = newWidthCache(cfg.DefaultBucketWidth, cfg.WidthCacheTTL)
	s.narrow = newNarrower(cfg.Narrowing)
	if err := migrate(ctx, session, cfg.Keyspace, log); err != nil {
		session.Close()
		return nil, err
	}
	log.Info("cassandra store ready", "hosts", strings.Join(cfg.Hosts, ","), "consistency", cfg.Consistency, "username", cfg.Username)
	return s, nil
}

// Connect calls New until it succeeds, ctx ends, or it fails for a reason
// other than unavailability, waiting with exponential backoff (from 500ms
// up to 15s) and logging each failure. It is what a process does at start
// while Cassandra is down; its readiness stays false meanwhile.
func Connect(ctx context.Context, cfg Config) (*Store, error) {
	wait := 500 * time.Millisecond
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	for attempt := 1; ; attempt++ {
		s, err := New(ctx, cfg)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
		log.Warn("cassandra unavailable, retrying", "attempt", attempt, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cassandra store: gave up after %d attempts: %w (last: %w)", attempt, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
	}
}

// Close closes the driver session. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.session.Close()
	return nil
}

// Ping runs a trivial query at the store's consistency; it fails with
// store.ErrUnavailable when the cluster cannot answer. It is the store's
// readiness check.
func (s *Store) Ping(ctx context.Context) error {
	var v string
	err := s.session.Query(`SELECT release_version FROM system.local WHERE key = 'local'`).
		Consistency(gocql.One).ScanContext(ctx, &v)
	return wrapErr("ping", err)
}

// wrapErr translates a driver error at the port: nil stays nil, missing
// rows become store.ErrNotFound, unavailability store.ErrUnavailable, and
// context errors match both themselves and store.ErrUnavailable. The driver's error value itself is never
// wrapped, only its text.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The request did not complete in time: for the caller it is
		// unavailable now. The driver also returns context errors of
		// its own (a dial it cancels while reconnecting) with the
		// caller's context still live, so both stay matchable.
		return fmt.Errorf("cassandra store: %s: %w: %w", op, store.ErrUnavailable, err)
	case errors.Is(err, gocql.ErrNotFound):
		return fmt.Errorf("cassandra store: %s: %w", op, store.ErrNotFound)
	case unavailable(err):
		return fmt.Errorf("cassandra store: %s: %w: %v", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("cassandra store: %s: %v", op, err)
}

// unavailable reports whether err means the cluster could not serve the
// request now (as opposed to a bad request).
func unavailable(err error) bool {
	var reqErr gocql.RequestError
	if errors.As(err, &reqErr) {
		switch reqErr.Code() {
		case gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeBootstrapping,
			gocql.ErrCodeWriteTimeout, gocql.ErrCodeReadTimeout, gocql.ErrCodeTruncate,
			gocql.ErrCodeCASWriteUnknown, gocql.ErrCodeWriteFailure, gocql.ErrCodeReadFailure:
			return true
		}
		return false
	}
	for _, e := range []error{gocql.ErrNoConnections, gocql.ErrSessionClosed, gocql.ErrTimeoutNoResponse,
		gocql.ErrConnectionClosed, gocql.ErrNoStreams,
		gocql.ErrNoConnectionsStarted, gocql.ErrUnavailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "no hosts available") ||
		strings.Contains(msg, "unable to discover protocol version") || strings.Contains(msg, "unable to create session")
}

// slogAdapter routes the driver's structured log lines to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) attrs(fields []gocql.LogField) []any {
	out := make([]any, 0, 2*len(fields))
	for _, f := range fields {
		out = append(out, f.Name, f.Value.String())
	}
	return out
}

func (a slogAdapter) Error(msg string, f ...gocql.LogField)   { a.l.Error(msg, a.attrs(f)...) }
func (a slogAdapter) Warning(msg string, f ...gocql.LogField) { a.l.Warn(msg, a.attrs(f)...) }
func (a slogAdapter) Info(msg string, f ...gocql.LogField)    { a.l.Debug(msg, a.attrs(f)...) }
func (a slogAdapter) Debug(msg string, f ...gocql.LogField)   { a.l.Debug(msg, a.attrs(f)...) }
