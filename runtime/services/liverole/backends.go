package liverole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	countersredis "github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/adapters/eventlog/backend"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/cassandrastore"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/pebblestore"
	"github.com/concord-chat/concord/runtime/domain/live/recent"
	"github.com/concord-chat/concord/runtime/domain/live/recent/redisrecent"
	"github.com/concord-chat/concord/runtime/domain/live/relay"
	"github.com/concord-chat/concord/runtime/domain/live/relay/redisrelay"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Log is what the live roles need of the event log: appending to a
// stream's pinned partition and consuming in groups. memlog and the Kafka
// adapter both have it.
type Log interface {
	eventlog.Log
	eventlog.Pinned
}

// Cache is the recent cache and the comment nonces, one adapter.
type Cache interface {
	live.Recent
	live.Nonces
}

// Backends are the backends the live-comment roles share: each opened
// once per process (OpenBackends), in process when every role is here,
// Kafka, Redis, Cassandra and etcd in a cluster. A field is nil when no
// live role of the process uses it.
type Backends struct {
	Log   Log
	Cache Cache
	Relay live.Relay
	Store live.Store
	Board live.Board
	// Counters are the comment rate limits' counters (the process's).
	Counters live.Counters

	// relays, when the relay is the relay tree, follows the relay nodes
	// the board announces into it (relay.go).
	relays *relayNodes
}

// BackendsPort is the port the process gives its live roles their
// backends under (a port of this package: only the live roles consume
// it, and the root gives it).
var BackendsPort = wiring.Key[Backends]{Name: "live/backends"}

// errSplit explains why a cluster refuses the embedded backends: each is
// one process's, and the live roles of a cluster must share theirs.
var errSplit = errors.New("in concord serve the live roles share Kafka (--eventlog=kafka://...), Redis (--redis=redis://...) and Cassandra (--store=cassandra://...); the embedded backends are one process's (concord dev runs every live role on them)")

// BackendsConfig is what OpenBackends opens the live backends from: the
// process's configuration and what the process opened already.
type BackendsConfig struct {
	Config config.Config
	Logger *slog.Logger
	// Roles are the live roles of the process: only the backends they
	// use are opened.
	Roles []string
	// Embedded allows the in-process backends (every role in one
	// process); a cluster's live roles share Kafka, Redis, Cassandra and
	// etcd, and the embedded ones are refused.
	Embedded bool
	// ChatLog is the process's chat event log, shared when --eventlog
	// names Kafka (one client per process); nil when it has none.
	ChatLog eventlog.Log
	// Cassandra is the process's Cassandra session (nil on Pebble): the
	// comments store uses its keyspace through it.
	Cassandra *cassandra.Store
	// Registry is the board of a cluster (nil in one process).
	Registry registry.Registry
	// Counters are the process's counters (the comment rate limits).
	Counters live.Counters
}

// IsLive reports whether name is one of the live-comment roles.
func IsLive(name string) bool {
	for _, r := range Roles {
		if r.Name == name {
			return true
		}
	}
	return false
}

// OpenBackends opens, once per process, the backends its live roles use
// (BackendsPort, which the process gives them), so the roles of one process
// meet on one log, cache, relay and board the way the roles of a cluster
// meet on Kafka, Redis and etcd: the event log (on Kafka the process's
// chat log itself), the recent cache and relay (Redis, or in process),
// the comments store (through the chat store's Cassandra session, or
// Pebble under <data-dir>/live) and the board (the registry, or in
// process). close releases what it opened, last first; the process
// closes it after the parts that use them.
func OpenBackends(ctx context.Context, c BackendsConfig) (_ Backends, close func() error, err error) {
	k := &backends{c: c}
	var out Backends
	defer func() {
		if err != nil {
			_ = k.closers.Close()
		}
	}()
	uses := func(names ...string) bool {
		for _, n := range names {
			if slices.Contains(c.Roles, n) {
				return true
			}
		}
		return false
	}
	if uses(NameAPI, NameRouter, NameArchiver, NameModeration) {
		if out.Log, err = k.eventLog(ctx); err != nil {
			return out, nil, err
		}
	}
	if uses(NameAPI, NameGateway, NameRouter) {
		if out.Cache, err = k.cache(ctx); err != nil {
			return out, nil, err
		}
	}
	if uses(NameAPI, NameGateway, NameRouter, NameRelay, NameModeration) ||
		(uses(NameArchiver) && (k.c.Registry != nil || k.c.Embedded)) {
		// The archiver reads the routers' sampled marks when it has a
		// board; without one it writes every stream with one shard.
		if out.Board, err = k.board(); err != nil {
			return out, nil, err
		}
	}
	if uses(NameGateway, NameRouter) {
		tree, err := useTree(c)
		if err != nil {
			return out, nil, err
		}
		if tree {
			tc := treeClient(k.c.Logger)
			out.Relay, out.relays = tc, &relayNodes{client: tc, board: out.Board}
		} else if out.Relay, err = k.relay(ctx); err != nil {
			return out, nil, err
		}
	}
	if uses(NameAPI, NameGateway, NameArchiver) {
		if out.Store, err = k.store(ctx); err != nil {
			return out, nil, err
		}
	}
	out.Counters = c.Counters
	return out, k.closers.Close, nil
}

// backends opens the live backends of OpenBackends, recording what to
// close.
type backends struct {
	c       BackendsConfig
	closers wiring.Closers
	// client is the process's Redis client once redis opened or found it.
	client *goredis.Client
}

// dataDir is where the embedded backends live: <data-dir>/live, apart
// from the chat platform's own event log and store.
func (k *backends) dataDir() string { return filepath.Join(k.c.Config.DataDir, "live") }

// eventLog opens --eventlog: "mem" is memlog under <data-dir>/live,
// persisted and synced before an append returns (one process only); on
// Kafka it is the process's chat log when the process has one.
func (k *backends) eventLog(ctx context.Context) (Log, error) {
	cfg := k.c.Config
	spec, dir := cfg.EventLog, ""
	if spec == "" || spec == "mem" || spec == "memlog" {
		if !k.c.Embedded {
			return nil, fmt.Errorf("--eventlog=%s: %w", spec, errSplit)
		}
		spec, dir = "memlog", k.dataDir()
	} else if pl, ok := k.c.ChatLog.(Log); ok {
		// The process's Kafka client, opened once and closed by the
		// process.
		return pl, nil
	}
	l, err := eventlogbackend.Open(ctx, spec, dir, k.c.Logger.With("component", "live-eventlog"), cfg.EventLogOptions()...)
	if err != nil {
		return nil, fmt.Errorf("live event log: %w", err)
	}
	pl, ok := l.(Log)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("live event log %T cannot pin streams to partitions", l)
	}
	k.closers.Add(l.Close)
	return pl, nil
}

// redisConfig parses --redis (redis://[user:pass@]host:port[/db] or a
// bare host:port) with --redis-password.
func (k *backends) redisConfig() (countersredis.Config, bool, error) {
	raw := k.c.Config.Redis
	if raw == "" || raw == "mem" {
		if !k.c.Embedded {
			return countersredis.Config{}, false, fmt.Errorf("--redis=%s: %w", raw, errSplit)
		}
		return countersredis.Config{}, false, nil
	}
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw
	}
	rc, err := countersredis.ParseURL(raw)
	if err != nil {
		return rc, false, fmt.Errorf("live: --redis: %w", err)
	}
	k.c.Config.ApplyRedisAuth(&rc)
	return rc, true, nil
}

// redis returns the process's Redis client, which the recent cache and
// the relay share (each backend is opened once per process): the
// counters' own when the process's counters are on Redis (always so in
// `concord serve`, which opens them from the same --redis), else one
// opened here, once, and closed with the backends. ok is false in one
// process on the in-process backends.
func (k *backends) redis(ctx context.Context) (_ *goredis.Client, ok bool, err error) {
	if k.client != nil {
		return k.client, true, nil
	}
	rc, ok, err := k.redisConfig()
	if err != nil || !ok {
		return nil, false, err
	}
	if ctr, shared := k.c.Counters.(*countersredis.Counters); shared {
		k.client = ctr.Client()
		return k.client, true, nil
	}
	c := goredis.NewClient(&goredis.Options{Addr: rc.Addr, DB: rc.DB, Username: rc.Username, Password: rc.Password,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, DisableIdentity: true, ClientName: "concord-live",
		ContextTimeoutEnabled: true})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, false, fmt.Errorf("live: redis %s: %w", rc.Addr, err)
	}
	k.closers.Add(c.Close)
	k.client = c
	return c, true, nil
}

// cache opens the recent cache and nonces: Redis, or in-process.
func (k *backends) cache(ctx context.Context) (Cache, error) {
	rdb, ok, err := k.redis(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return recent.New(), nil
	}
	c, err := redisrecent.New(ctx, redisrecent.Config{Client: rdb, Prefix: k.c.Config.Live.Prefix})
	if err != nil {
		return nil, fmt.Errorf("live recent cache: %w", err)
	}
	k.closers.Add(c.Close)
	return c, nil
}

// relay opens the relay: Redis pub/sub, or in-process.
func (k *backends) relay(ctx context.Context) (live.Relay, error) {
	rdb, ok, err := k.redis(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return relay.New(), nil
	}
	r, err := redisrelay.New(ctx, redisrelay.Config{Client: rdb,
		Prefix: k.c.Config.Live.Prefix, Logger: k.c.Logger.With("component", "live-relay")})
	if err != nil {
		return nil, fmt.Errorf("live relay: %w", err)
	}
	k.closers.Add(r.Close)
	return r, nil
}

// store opens the comments store on --store: Cassandra (the chat store's
// keyspace, through its session, in tables of its own), or Pebble under
// <data-dir>/live.
func (k *backends) store(ctx context.Context) (live.Store, error) {
	cfg := k.c.Config
	if k.c.Cassandra != nil {
		s, err := cassandrastore.New(ctx, k.c.Cassandra)
		if err != nil {
			return nil, fmt.Errorf("live comments store: %w", err)
		}
		return s, nil
	}
	if strings.HasPrefix(cfg.Store, "cassandra://") || strings.HasPrefix(cfg.Store, "scylla://") {
		// The chat store is not open in this process (it runs no role
		// that keeps one): a session of its own.
		cc, err := cassandra.ParseURL(cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("live: --store: %w", err)
		}
		cfg.ApplyCassandraAuth(&cc)
		cc.Logger = k.c.Logger.With("component", "live-store")
		cs, err := cassandra.Connect(ctx, cc)
		if err != nil {
			return nil, fmt.Errorf("live comments store: %w", err)
		}
		s, err := cassandrastore.New(ctx, cs)
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("live comments store: %w", err)
		}
		k.closers.Add(cs.Close)
		return s, nil
	}
	if !k.c.Embedded {
		return nil, fmt.Errorf("--store=%s: %w", cfg.Store, errSplit)
	}
	s, err := pebblestore.Open(filepath.Join(k.dataDir(), "comments"), k.c.Logger.With("component", "live-store"))
	if err != nil {
		return nil, fmt.Errorf("live comments store: %w", err)
	}
	k.closers.Add(s.Close)
	return s, nil
}

// board is the registry in a cluster (etcd: rules, bans and viewer
// counts reach every process), the in-process board in one process, its
// persistent keys kept in <data-dir>/live/board.json.
func (k *backends) board() (live.Board, error) {
	if k.c.Registry == nil {
		if !k.c.Embedded {
			return nil, fmt.Errorf("live: no registry for the board: %w", errSplit)
		}
		// Rules, bans and stream records outlive a restart of dev, as
		// they outlive any process in etcd.
		if err := os.MkdirAll(k.dataDir(), 0o700); err != nil {
			return nil, fmt.Errorf("live board: %w", err)
		}
		brd, err := board.Open(filepath.Join(k.dataDir(), "board.json"))
		if err != nil {
			return nil, fmt.Errorf("live board: %w", err)
		}
		return brd, nil
	}
	brd, ok := k.c.Registry.(live.Board)
	if !ok {
		return nil, fmt.Errorf("live: the registry %T cannot watch its kv space (want etcd)", k.c.Registry)
	}
	return brd, nil
}
