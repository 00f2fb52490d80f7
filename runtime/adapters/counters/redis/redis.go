// Package redis is the Redis adapter of the counters port, built on
// github.com/redis/go-redis/v9.
//
// Every call is one round trip. Incr, Take and Ban are Lua scripts
// (redis.NewScript: EVALSHA, falling back to EVAL once per connection), so
// each runs atomically on the server; Get is a GET and Banned pipelines one
// PTTL per key. Keys are Prefix + "c:" (Incr/Get), "r:" (Take) or "b:"
// (Ban) + the caller's key, so the three namespaces of the port never meet.
// Every key carries an expiry, so an idle key costs nothing after its window,
// its bucket's refill or its ban.
//
// Redis is the "counters" class of state (regional, allowed to be lost): run it with replicas but no
// persistence requirement. A failover that loses writes loses counts, which
// the port's contract allows (brief over-allowance).
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concord-chat/concord/runtime/adapters/counters"
)

// Config configures Counters.
type Config struct {
	// Addr is the server's host:port. Required.
	Addr string
	// DB is the logical database. Default 0.
	DB int
	// Username and Password authenticate (ACL or requirepass): AUTH
	// [Username] Password on every new connection. Default none. The
	// password never appears in String, logs or errors.
	Username, Password string
	// Prefix is prepended to every key, so several deployments or test runs
	// can share one server. Default "concord:".
	Prefix string
	// PoolSize is the maximum number of connections. Default 10 per CPU
	// (go-redis's default).
	PoolSize int
	// DialTimeout bounds connecting. Default 2s.
	DialTimeout time.Duration
	// Timeout bounds each command's read and write. Rate limiting sits on
	// every request's path, so it is short. Default 500ms.
	Timeout time.Duration
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// ParseURL reads "redis://[user:password@]host[:port][/db][?prefix=P]" into
// a Config; the port defaults to 6379. User and password are
// percent-encoded. Errors name the URL with its password redacted.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// A *url.Error quotes the whole URL, password included: keep only
		// what was wrong with it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Config{}, fmt.Errorf("%w: redis url: %v", counters.ErrInvalid, err)
	}
	raw = u.Redacted()
	if u.Scheme != "redis" {
		return Config{}, fmt.Errorf("%w: redis url %q: scheme must be redis", counters.ErrInvalid, raw)
	}
	if u.Hostname() == "" {
		return Config{}, fmt.Errorf("%w: redis url %q: no host", counters.ErrInvalid, raw)
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	cfg := Config{Addr: net.JoinHostPort(u.Hostname(), port)}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if cfg.DB, err = strconv.Atoi(db); err != nil || cfg.DB < 0 {
			return Config{}, fmt.Errorf("%w: redis url %q: database %q is not a number", counters.ErrInvalid, raw, db)
		}
	}
	for k, v := range u.Query() {
		switch k {
		case "prefix":
			cfg.Prefix = v[0]
		default:
			return Config{}, fmt.Errorf("%w: redis url %q: unknown parameter %q", counters.ErrInvalid, raw, k)
		}
	}
	return cfg, nil
}

// String describes the configuration for logs, the password redacted.
func (c Config) String() string {
	pw := ""
	if c.Password != "" {
		pw = "xxxxx"
	}
	return fmt.Sprintf("redis addr=%s db=%d prefix=%s username=%s password=%s", c.Addr, c.DB, c.Prefix, c.Username, pw)
}

// LogValue implements slog.LogValuer with the password redacted.
func (c Config) LogValue() slog.Value {
	pw := ""
	if c.Password != "" {
		pw = "xxxxx"
	}
	return slog.GroupValue(slog.String("addr", c.Addr), slog.Int("db", c.DB), slog.String("prefix", c.Prefix),
		slog.String("username", c.Username), slog.String("password", pw))
}

// Counters is the Redis implementation of counters.Counters.
type Counters struct {
	client *goredis.Client
	prefix string
	log    *slog.Logger
	closed atomic.Bool
}

var _ counters.Counters = (*Counters)(nil)

// New connects to the server and checks that it answers.
func New(ctx context.Context, cfg Config) (*Counters, error) {
	if cfg.Addr == "" {
		return nil, fmt.Errorf("%w: redis: Addr is required", counters.ErrInvalid)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "concord:"
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	client := goredis.NewClient(&goredis.Options{
		Addr:         cfg.Addr,
		DB:           cfg.DB,
		Username:     cfg.Username,
		Password:     cfg.Password,
		PoolSize:     cfg.PoolSize,
		DialTimeout:  cfg.DialTimeout,
		ReadTimeout:  cfg.Timeout,
		WriteTimeout: cfg.Timeout,
		// Rate limiting answers a request now or fails open; a long retry
		// loop would only add latency to every request during an outage.
		MaxRetries:            1,
		DisableIdentity:       true,
		ClientName:            "concord-counters",
		ContextTimeoutEnabled: true,
	})
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		if goredis.IsAuthError(err) {
			// The server's reply (NOAUTH, WRONGPASS) never holds the password.
			return nil, fmt.Errorf("%w: redis %s (user %q, password set: %t): %v; check --redis-password (CONCORD_REDIS_PASSWORD) or the URL's user:password",
				ErrAuth, cfg.Addr, cfg.Username, cfg.Password != "", err)
		}
		return nil, fmt.Errorf("%w: redis %s: ping: %v", counters.ErrUnavailable, cfg.Addr, err)
	}
	cfg.Logger.Info("counters connected", "addr", cfg.Addr, "db", cfg.DB, "prefix", cfg.Prefix, "authenticated", cfg.Password != "")
	return &Counters{client: client, prefix: cfg.Prefix, log: cfg.Logger}, nil
}

// incrScript adds ARGV[1] to KEYS[1] and gives a key without expiry (one
// INCRBY just created) ARGV[2] milliseconds to live.
var incrScript = goredis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v
`)

// takeScript is counters.GCRA, operation for operation. KEYS[1] holds the
// bucket's theoretical arrival time in microseconds; ARGV is now (µs),
// limit and window (µs). It returns {allowed, remaining, reset_after µs,
// retry_after µs}. Numbers are Lua doubles, exact below 2^53 µs (year
// 2255); they are written back with %.0f, never in exponent form.
var takeScript = goredis.NewScript(`
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local interval = math.floor(window / limit)
if interval < 1 then interval = 1 end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nxt = tat + interval
if nxt - now > window then
	return {0, 0, tat - now, nxt - now - window}
end
local ttl = math.ceil((nxt - now) / 1000)
if ttl < 1 then ttl = 1 end
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', string.format('%.0f', ttl))
local remaining = math.floor((window - (nxt - now)) / interval)
local retry = 0
if remaining == 0 then retry = nxt + interval - now - window end
return {1, remaining, nxt - now, retry}
`)

// banScript sets KEYS[1] to expire in ARGV[1] milliseconds unless it
// already lives longer.
var banScript = goredis.NewScript(`
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
	redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 0
`)

func (c *Counters) check(key string) error {
	if c.closed.Load() {
		return counters.ErrClosed
	}
	return counters.CheckKey(key)
}

// fail translates a go-redis error; no raw client error leaves the adapter.
func (c *Counters) fail(op, key string, err error) error {
	if errors.Is(err, goredis.ErrClosed) || c.closed.Load() {
		return fmt.Errorf("%w: %s %q", counters.ErrClosed, op, key)
	}
	return fmt.Errorf("%w: %s %q: %v", counters.ErrUnavailable, op, key, err)
}

// Incr implements counters.Counters.
func (c *Counters) Incr(ctx context.Context, key string, by int64, ttl time.Duration) (int64, error) {
	if err := c.check(key); err != nil {
		return 0, err
	}
	if err := counters.CheckTTL(key, ttl); err != nil {
		return 0, err
	}
	v, err := incrScript.Run(ctx, c.client, []string{c.prefix + "c:" + key}, by, ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, c.fail("incr", key, err)
	}
	return v, nil
}

// Get implements counters.Counters.
func (c *Counters) Get(ctx context.Context, key string) (int64, error) {
	if err := c.check(key); err != nil {
		return 0, err
	}
	v, err := c.client.Get(ctx, c.prefix+"c:"+key).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, c.fail("get", key, err)
	}
	return v, nil
}

// Take implements counters.Counters.
func (c *Counters) Take(ctx context.Context, key string, limit int, window time.Duration, now time.Time) (counters.Decision, error) {
	if err := c.check(key); err != nil {
		return counters.Decision{}, err
	}
	if err := counters.CheckBucket(key, limit, window); err != nil {
		return counters.Decision{}, err
	}
	r, err := takeScript.Run(ctx, c.client, []string{c.prefix + "r:" + key}, now.UnixMicro(), limit, window.Microseconds()).Int64Slice()
	if err != nil {
		return counters.Decision{}, c.fail("take", key, err)
	}
	if len(r) != 4 {
		return counters.Decision{}, fmt.Errorf("%w: take %q: script returned %d values", counters.ErrUnavailable, key, len(r))
	}
	return counters.Decision{
		Allowed:    r[0] == 1,
		Limit:      limit,
		Remaining:  int(r[1]),
		ResetAfter: time.Duration(r[2]) * time.Microsecond,
		RetryAfter: time.Duration(r[3]) * time.Microsecond,
	}, nil
}

// Ban implements counters.Counters.
func (c *Counters) Ban(ctx context.Context, key string, ttl time.Duration) error {
	if err := c.check(key); err != nil {
		return err
	}
	if err := counters.CheckTTL(key, ttl); err != nil {
		return err
	}
	if err := banScript.Run(ctx, c.client, []string{c.prefix + "b:" + key}, ttl.Milliseconds()).Err(); err != nil {
		return c.fail("ban", key, err)
	}
	return nil
}

// Banned implements counters.Counters.
func (c *Counters) Banned(ctx context.Context, keys ...string) (time.Duration, error) {
	for _, key := range keys {
		if err := c.check(key); err != nil {
			return 0, err
		}
	}
	switch len(keys) {
	case 0:
		return 0, nil
	case 1:
		left, err := c.client.PTTL(ctx, c.prefix+"b:"+keys[0]).Result()
		if err != nil {
			return 0, c.fail("banned", keys[0], err)
		}
		return max(left, 0), nil
	}
	cmds, err := c.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, key := range keys {
			p.PTTL(ctx, c.prefix+"b:"+key)
		}
		return nil
	})
	if err != nil {
		return 0, c.fail("banned", strings.Join(keys, ","), err)
	}
	var longest time.Duration
	for _, cmd := range cmds {
		longest = max(longest, cmd.(*goredis.DurationCmd).Val())
	}
	return longest, nil
}

// Client is the connection pool the counters use: the process's Redis
// client, which its other Redis adapters (the live recent cache and
// relay) share rather than dial their own. Close closes it.
func (c *Counters) Client() *goredis.Client { return c.client }

// Close implements counters.Counters.
func (c *Counters) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if err := c.client.Close(); err != nil {
		return fmt.Errorf("counters: redis: close: %v", err)
	}
	return nil
}
