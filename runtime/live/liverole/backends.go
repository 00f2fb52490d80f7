package liverole

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/counters/mem"
	countersredis "github.com/concord-chat/concord/runtime/counters/redis"
	"github.com/concord-chat/concord/runtime/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/eventlog/backend"
	"github.com/concord-chat/concord/runtime/live"
	"github.com/concord-chat/concord/runtime/live/board"
	"github.com/concord-chat/concord/runtime/live/commentstore/cassandrastore"
	"github.com/concord-chat/concord/runtime/live/commentstore/pebblestore"
	"github.com/concord-chat/concord/runtime/live/recent"
	"github.com/concord-chat/concord/runtime/live/recent/redisrecent"
	"github.com/concord-chat/concord/runtime/live/relay"
	"github.com/concord-chat/concord/runtime/live/relay/redisrelay"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store/cassandra"
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

// errSplit explains why `concord serve` refuses the embedded backends:
// each is one process's, and the live roles of a cluster must share
// theirs.
var errSplit = errors.New("in concord serve the live roles share Kafka (--eventlog=kafka://...), Redis (--redis=redis://...) and Cassandra (--store=cassandra://...); the embedded backends are one process's (concord dev runs every live role on them)")

// backends opens the backends the live roles need, from the process's
// configuration, once per process: every live role of the process shares
// each one through the process's seams (role.Shared), so the roles of
// `concord dev` meet on one in-process log, cache, relay and board the
// way the roles of a cluster meet on Kafka, Redis and etcd. Each closes
// with the process's seams, after the parts that use it.
type backends struct {
	b *role.Builder
}

// The seams the live backends are shared under.
var (
	logKey      = role.Key[Log]{Name: "live-eventlog"}
	cacheKey    = role.Key[Cache]{Name: "live-recent"}
	relayKey    = role.Key[live.Relay]{Name: "live-relay"}
	countersKey = role.Key[live.Counters]{Name: "live-counters"}
	storeKey    = role.Key[live.Store]{Name: "live-store"}
	boardKey    = role.Key[live.Board]{Name: "live-board"}
)

// dataDir is where the embedded backends live: <data-dir>/live, apart
// from the chat platform's own event log and store.
func (k *backends) dataDir() string { return filepath.Join(k.b.Config.DataDir, "live") }

// eventLog opens --eventlog: "mem" is memlog under <data-dir>/live,
// persisted and synced before an append returns (`concord dev` only).
func (k *backends) eventLog(ctx context.Context) (Log, error) {
	return role.Shared(k.b.Seams, logKey, func() (Log, func() error, error) { return k.openEventLog(ctx) })
}

func (k *backends) openEventLog(ctx context.Context) (Log, func() error, error) {
	cfg := k.b.Config
	spec, dir := cfg.EventLog, ""
	if spec == "" || spec == "mem" || spec == "memlog" {
		if !k.b.Dev() {
			return nil, nil, fmt.Errorf("--eventlog=%s: %w", spec, errSplit)
		}
		spec, dir = "memlog", k.dataDir()
	}
	l, err := eventlogbackend.Open(ctx, spec, dir, k.b.Logger.With("component", "live-eventlog"), cfg.EventLogOptions()...)
	if err != nil {
		return nil, nil, fmt.Errorf("live event log: %w", err)
	}
	pl, ok := l.(Log)
	if !ok {
		l.Close()
		return nil, nil, fmt.Errorf("live event log %T cannot pin streams to partitions", l)
	}
	return pl, l.Close, nil
}

// redisConfig parses --redis (redis://[user:pass@]host:port[/db] or a
// bare host:port) with --redis-password.
func (k *backends) redisConfig() (countersredis.Config, bool, error) {
	raw := k.b.Config.Redis
	if raw == "" || raw == "mem" {
		if !k.b.Dev() {
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
	k.b.Config.ApplyRedisAuth(&rc)
	return rc, true, nil
}

// cache opens the recent cache and nonces: Redis, or in-process.
func (k *backends) cache(ctx context.Context) (Cache, error) {
	return role.Shared(k.b.Seams, cacheKey, func() (Cache, func() error, error) {
		rc, ok, err := k.redisConfig()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return recent.New(), nil, nil
		}
		c, err := redisrecent.New(ctx, redisrecent.Config{Addr: rc.Addr, DB: rc.DB, Username: rc.Username, Password: rc.Password,
			Prefix: k.b.Config.Live.Prefix})
		if err != nil {
			return nil, nil, fmt.Errorf("live recent cache: %w", err)
		}
		return c, c.Close, nil
	})
}

// relay opens the relay: Redis pub/sub, or in-process.
func (k *backends) relay(ctx context.Context) (live.Relay, error) {
	return role.Shared(k.b.Seams, relayKey, func() (live.Relay, func() error, error) {
		rc, ok, err := k.redisConfig()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return relay.New(), nil, nil
		}
		r, err := redisrelay.New(ctx, redisrelay.Config{Addr: rc.Addr, DB: rc.DB, Username: rc.Username, Password: rc.Password,
			Prefix: k.b.Config.Live.Prefix, Logger: k.b.Logger.With("component", "live-relay")})
		if err != nil {
			return nil, nil, fmt.Errorf("live relay: %w", err)
		}
		return r, r.Close, nil
	})
}

// counters are the process's shared counters when it has them (the
// chat API's), else opened from --redis.
func (k *backends) counters(ctx context.Context) (live.Counters, error) {
	if k.b.Counters != nil {
		return k.b.Counters, nil
	}
	return role.Shared(k.b.Seams, countersKey, func() (live.Counters, func() error, error) {
		rc, ok, err := k.redisConfig()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			c, err := mem.New(mem.Config{})
			if err != nil {
				return nil, nil, fmt.Errorf("live counters: %w", err)
			}
			return c, nil, nil
		}
		rc.Logger = k.b.Logger.With("component", "live-counters")
		c, err := countersredis.New(ctx, rc)
		if err != nil {
			return nil, nil, fmt.Errorf("live counters: %w", err)
		}
		return c, c.Close, nil
	})
}

// store opens the comments store on --store: Cassandra (the chat
// store's keyspace, its own tables), or Pebble under <data-dir>/live.
func (k *backends) store(ctx context.Context) (live.Store, error) {
	return role.Shared(k.b.Seams, storeKey, func() (live.Store, func() error, error) { return k.openStore(ctx) })
}

func (k *backends) openStore(ctx context.Context) (live.Store, func() error, error) {
	cfg := k.b.Config
	if strings.HasPrefix(cfg.Store, "cassandra://") || strings.HasPrefix(cfg.Store, "scylla://") {
		cc, err := cassandra.ParseURL(cfg.Store)
		if err != nil {
			return nil, nil, fmt.Errorf("live: --store: %w", err)
		}
		cfg.ApplyCassandraAuth(&cc)
		cc.Logger = k.b.Logger.With("component", "live-store")
		cs, err := cassandra.Connect(ctx, cc)
		if err != nil {
			return nil, nil, fmt.Errorf("live comments store: %w", err)
		}
		s, err := cassandrastore.New(ctx, cs)
		if err != nil {
			cs.Close()
			return nil, nil, fmt.Errorf("live comments store: %w", err)
		}
		return s, cs.Close, nil
	}
	if !k.b.Dev() {
		return nil, nil, fmt.Errorf("--store=%s: %w", cfg.Store, errSplit)
	}
	s, err := pebblestore.Open(filepath.Join(k.dataDir(), "comments"), k.b.Logger.With("component", "live-store"))
	if err != nil {
		return nil, nil, fmt.Errorf("live comments store: %w", err)
	}
	return s, s.Close, nil
}

// board is the registry in `concord serve` (etcd: rules, bans and viewer
// counts reach every process), the in-process board in `concord dev`,
// its persistent keys kept in <data-dir>/live/board.json.
func (k *backends) board() (live.Board, error) {
	return role.Shared(k.b.Seams, boardKey, func() (live.Board, func() error, error) {
		b, err := k.openBoard()
		return b, nil, err
	})
}

func (k *backends) openBoard() (live.Board, error) {
	if k.b.Dev() {
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
	brd, ok := k.b.Registry.(live.Board)
	if !ok {
		return nil, fmt.Errorf("live: the registry %T cannot watch its kv space (want etcd)", k.b.Registry)
	}
	return brd, nil
}
