// Package mem is the in-process adapter of the counters port, for
// `concord dev` and unit tests: keys are spread over sharded maps, each
// guarded by its own mutex, and expired entries are swept lazily as the
// shard is written (no background goroutine). Everything is lost when the
// process exits, which the port's contract allows.
package mem

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
)

// Config configures Counters. The zero value is usable.
type Config struct {
	// Shards is the number of independently locked maps. Default 64.
	Shards int
	// SweepEvery is how many writes a shard takes between sweeps of its
	// expired entries. Default 1024.
	SweepEvery int
	// Now is the clock for expiry of Incr counters and bans. Take uses the
	// time its caller passes. Default time.Now.
	Now func() time.Time
}

// Counters is the in-process implementation of counters.Counters.
type Counters struct {
	seed   maphash.Seed
	shards []shard
	sweep  int
	now    func() time.Time
	closed atomic.Bool
}

var _ counters.Counters = (*Counters)(nil)

type shard struct {
	mu      sync.Mutex
	writes  int
	counts  map[string]count
	buckets map[string]bucket
	bans    map[string]int64 // expiry, unix nanoseconds
	_       [40]byte         // keep neighbouring shards' locks off one cache line
}

type count struct {
	v   int64
	exp int64 // unix nanoseconds
}

type bucket struct {
	tat int64 // theoretical arrival time on the caller's clock, microseconds
	exp int64 // when the bucket is full again on the adapter's clock, unix nanoseconds
}

// New returns empty Counters.
func New(cfg Config) (*Counters, error) {
	if cfg.Shards < 0 || cfg.SweepEvery < 0 {
		return nil, fmt.Errorf("%w: mem: negative Shards or SweepEvery", counters.ErrInvalid)
	}
	if cfg.Shards == 0 {
		cfg.Shards = 64
	}
	if cfg.SweepEvery == 0 {
		cfg.SweepEvery = 1024
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Counters{seed: maphash.MakeSeed(), shards: make([]shard, cfg.Shards), sweep: cfg.SweepEvery, now: cfg.Now}
	for i := range c.shards {
		s := &c.shards[i]
		s.counts = make(map[string]count)
		s.buckets = make(map[string]bucket)
		s.bans = make(map[string]int64)
	}
	return c, nil
}

func (c *Counters) shard(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%uint64(len(c.shards))]
}

func (c *Counters) check(key string) error {
	if c.closed.Load() {
		return counters.ErrClosed
	}
	return counters.CheckKey(key)
}

// Incr implements counters.Counters.
func (c *Counters) Incr(ctx context.Context, key string, by int64, ttl time.Duration) (int64, error) {
	if err := c.check(key); err != nil {
		return 0, err
	}
	if err := counters.CheckTTL(key, ttl); err != nil {
		return 0, err
	}
	now := c.now().UnixNano()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote(now, c.sweep)
	e, ok := s.counts[key]
	if !ok || e.exp <= now {
		e = count{exp: now + int64(ttl)}
	}
	e.v += by
	s.counts[key] = e
	return e.v, nil
}

// Get implements counters.Counters.
func (c *Counters) Get(ctx context.Context, key string) (int64, error) {
	if err := c.check(key); err != nil {
		return 0, err
	}
	now := c.now().UnixNano()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.counts[key]; ok && e.exp > now {
		return e.v, nil
	}
	return 0, nil
}

// Take implements counters.Counters.
func (c *Counters) Take(ctx context.Context, key string, limit int, window time.Duration, now time.Time) (counters.Decision, error) {
	if err := c.check(key); err != nil {
		return counters.Decision{}, err
	}
	if err := counters.CheckBucket(key, limit, window); err != nil {
		return counters.Decision{}, err
	}
	clock := c.now().UnixNano()
	at := now.UnixMicro()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[key]
	if ok && b.exp <= clock {
		b = bucket{}
	}
	d, tat := counters.GCRA(b.tat, at, limit, window.Microseconds())
	if d.Allowed {
		s.wrote(clock, c.sweep)
		s.buckets[key] = bucket{tat: tat, exp: clock + (tat-at)*int64(time.Microsecond)}
	}
	return d, nil
}

// Ban implements counters.Counters.
func (c *Counters) Ban(ctx context.Context, key string, ttl time.Duration) error {
	if err := c.check(key); err != nil {
		return err
	}
	if err := counters.CheckTTL(key, ttl); err != nil {
		return err
	}
	now := c.now().UnixNano()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote(now, c.sweep)
	if exp := now + int64(ttl); exp > s.bans[key] {
		s.bans[key] = exp
	}
	return nil
}

// Banned implements counters.Counters.
func (c *Counters) Banned(ctx context.Context, keys ...string) (time.Duration, error) {
	now := c.now().UnixNano()
	var longest int64
	for _, key := range keys {
		if err := c.check(key); err != nil {
			return 0, err
		}
		s := c.shard(key)
		s.mu.Lock()
		exp := s.bans[key]
		s.mu.Unlock()
		longest = max(longest, exp-now)
	}
	return time.Duration(longest), nil
}

// Close implements counters.Counters. It drops every entry.
func (c *Counters) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.counts)
		clear(s.buckets)
		clear(s.bans)
		s.mu.Unlock()
	}
	return nil
}

// Len returns the number of entries held (counters, buckets and bans),
// including expired ones not yet swept, for tests and metrics.
func (c *Counters) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.counts) + len(s.buckets) + len(s.bans)
		s.mu.Unlock()
	}
	return n
}

// wrote counts a write and sweeps the shard every sweep writes. The caller
// holds s.mu.
func (s *shard) wrote(now int64, every int) {
	s.writes++
	if s.writes >= every {
		s.writes = 0
		s.sweepExpired(now)
	}
}

func (s *shard) sweepExpired(now int64) {
	for k, e := range s.counts {
		if e.exp <= now {
			delete(s.counts, k)
		}
	}
	for k, b := range s.buckets {
		if b.exp <= now {
			delete(s.buckets, k)
		}
	}
	for k, exp := range s.bans {
		if exp <= now {
			delete(s.bans, k)
		}
	}
}
