// Package redisrecent is the Redis adapter of the recent-comments cache
// and the comment nonces: one sorted set per stream, scored by seq, with
// each event's encoding as the member, trimmed to the newest
// live.RecentSize and expiring a day after the stream ends (a week after
// its last write at most, so an abandoned stream does not stay forever).
package redisrecent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Config configures a Cache.
type Config struct {
	// Client, when set, is the process's Redis client, shared with its
	// other adapters (each backend is opened once per process): New
	// dials nothing, Close leaves it open, and Addr, DB, the credentials
	// and Timeout are the client's business.
	Client *goredis.Client
	// Addr is host:port. Required without Client.
	Addr               string
	DB                 int
	Username, Password string
	// Prefix is prepended to every key (default "concord:").
	Prefix string
	// Timeout bounds each command (default 2 s).
	Timeout time.Duration
}

// maxAge bounds a stream's set after its last write.
const maxAge = 7 * 24 * time.Hour

// Cache is a live.Recent and live.Nonces on Redis.
type Cache struct {
	c      *goredis.Client
	own    bool // c was dialled by New (Close closes it)
	prefix string
}

var (
	_ live.Recent = (*Cache)(nil)
	_ live.Nonces = (*Cache)(nil)
)

// New connects and checks the server answers.
func New(ctx context.Context, cfg Config) (*Cache, error) {
	if cfg.Client != nil {
		if cfg.Prefix == "" {
			cfg.Prefix = "concord:"
		}
		if err := cfg.Client.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("%w: redis: %v", live.ErrUnavailable, err)
		}
		return &Cache{c: cfg.Client, prefix: cfg.Prefix}, nil
	}
	if cfg.Addr == "" {
		return nil, fmt.Errorf("%w: redisrecent: Addr is required", live.ErrInvalid)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "concord:"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	c := goredis.NewClient(&goredis.Options{Addr: cfg.Addr, DB: cfg.DB, Username: cfg.Username, Password: cfg.Password,
		ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout, DisableIdentity: true, ClientName: "concord-live-recent",
		ContextTimeoutEnabled: true})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: redis %s: %v", live.ErrUnavailable, cfg.Addr, err)
	}
	return &Cache{c: c, own: true, prefix: cfg.Prefix}, nil
}

// Close releases the connections New dialled (a shared Client stays open).
func (c *Cache) Close() error {
	if !c.own {
		return nil
	}
	return c.c.Close()
}

// key is the stream's set; the braces keep a stream on one cluster slot.
func (c *Cache) key(stream snowflake.ID) string {
	return c.prefix + "live:recent:{" + stream.String() + "}"
}

func unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: redis %s: %v", live.ErrUnavailable, op, err)
}

// Add implements live.Recent in one MULTI: each seq's old member is
// removed before the new one is added, so a republished event replaces
// itself; the set is then trimmed.
func (c *Cache) Add(ctx context.Context, stream snowflake.ID, events []live.Event) error {
	if len(events) == 0 {
		return nil
	}
	k := c.key(stream)
	_, err := c.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for _, ev := range events {
			b, err := live.EncodeEvent(ev)
			if err != nil {
				return err
			}
			s := strconv.FormatInt(ev.Seq, 10)
			p.ZRemRangeByScore(ctx, k, s, s)
			p.ZAdd(ctx, k, goredis.Z{Score: float64(ev.Seq), Member: b})
		}
		p.ZRemRangeByRank(ctx, k, 0, -live.RecentSize-1)
		p.ExpireNX(ctx, k, maxAge)
		return nil
	})
	return unavailable("add", err)
}

// Drop implements live.Recent.
func (c *Cache) Drop(ctx context.Context, stream snowflake.ID, seq int64) error {
	s := strconv.FormatInt(seq, 10)
	return unavailable("drop", c.c.ZRemRangeByScore(ctx, c.key(stream), s, s).Err())
}

// Range implements live.Recent.
func (c *Cache) Range(ctx context.Context, stream snowflake.ID, after, before int64, n int) ([]live.Event, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: range of %d", live.ErrInvalid, n)
	}
	hi := "+inf"
	if before > 0 {
		hi = "(" + strconv.FormatInt(before, 10)
	}
	// Newest first (BYSCORE REV: Start is the high bound), n at most.
	members, err := c.c.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: c.key(stream), ByScore: true, Rev: true,
		Start: hi, Stop: "(" + strconv.FormatInt(after, 10), Count: int64(n)}).Result()
	if err != nil {
		return nil, unavailable("range", err)
	}
	out := make([]live.Event, 0, len(members))
	for i := len(members) - 1; i >= 0; i-- {
		ev, err := live.DecodeEvent(stream, []byte(members[i]))
		if err != nil {
			// Not ours (or corrupt): skip it rather than fail every join.
			continue
		}
		out = append(out, ev)
	}
	return out, nil
}

// Expire implements live.Recent.
func (c *Cache) Expire(ctx context.Context, stream snowflake.ID, ttl time.Duration) error {
	return unavailable("expire", c.c.PExpire(ctx, c.key(stream), ttl).Err())
}

func (c *Cache) nonceKey(key string) string { return c.prefix + "live:nonce:" + key }

// Claim implements live.Nonces with SET NX; a pending claim holds "".
func (c *Cache) Claim(ctx context.Context, key string, ttl time.Duration) ([]byte, bool, error) {
	k := c.nonceKey(key)
	ok, err := c.c.SetNX(ctx, k, "", ttl).Result()
	if err != nil {
		return nil, false, unavailable("claim", err)
	}
	if ok {
		return nil, true, nil
	}
	v, err := c.c.Get(ctx, k).Bytes()
	if errors.Is(err, goredis.Nil) {
		// Released in between: try once more.
		ok, err = c.c.SetNX(ctx, k, "", ttl).Result()
		return nil, ok, unavailable("claim", err)
	}
	if err != nil {
		return nil, false, unavailable("claim", err)
	}
	if len(v) == 0 {
		return nil, false, nil
	}
	return v, false, nil
}

// Set implements live.Nonces.
func (c *Cache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return unavailable("set", c.c.Set(ctx, c.nonceKey(key), value, ttl).Err())
}

// Release implements live.Nonces.
func (c *Cache) Release(ctx context.Context, key string) error {
	return unavailable("release", c.c.Del(ctx, c.nonceKey(key)).Err())
}
