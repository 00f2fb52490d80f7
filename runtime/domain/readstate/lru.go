package readstate

import (
	"container/list"
	"context"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// lru is a cache sharded by id. Each shard has its own lock and LRU order;
// an entry is only touched under its shard's lock. Loading a missing entry
// happens under the lock too, so an id is never loaded twice at once.
//
// Only clean entries are evicted: a dirty entry over capacity calls
// pressure, which asks for a flush (all writes go through the serialised
// flush, so an older copy can never overwrite a newer one), and is evicted
// by a later trim once clean. Capacity is therefore a soft limit.
type lru[V any] struct {
	shards   []lruShard[V]
	perShard int
	dirty    func(V) bool
	pressure func()
}

type lruShard[V any] struct {
	mu    sync.Mutex
	items map[snowflake.ID]*list.Element
	order list.List // front: most recently used
}

type lruItem[V any] struct {
	id snowflake.ID
	v  V
}

func newLRU[V any](shards, capacity int, dirty func(V) bool, pressure func()) *lru[V] {
	c := &lru[V]{shards: make([]lruShard[V], shards), perShard: max(1, capacity/shards), dirty: dirty, pressure: pressure}
	for i := range c.shards {
		c.shards[i].items = map[snowflake.ID]*list.Element{}
	}
	return c
}

func (c *lru[V]) shard(id snowflake.ID) *lruShard[V] {
	// Snowflakes' low bits are a sequence and worker; mix before picking.
	h := uint64(id) * 0x9E3779B97F4A7C15
	return &c.shards[h>>32%uint64(len(c.shards))]
}

// do runs fn on id's entry, loading it first if it is not cached.
func (c *lru[V]) do(ctx context.Context, id snowflake.ID, load func(context.Context) (V, error), fn func(V)) error {
	return c.doErr(ctx, id, load, func(v V) error { fn(v); return nil })
}

// doErr is do with an fn that can fail; its error is returned.
func (c *lru[V]) doErr(ctx context.Context, id snowflake.ID, load func(context.Context) (V, error), fn func(V) error) error {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[id]
	if ok {
		s.order.MoveToFront(e)
	} else {
		v, err := load(ctx)
		if err != nil {
			return err
		}
		e = s.order.PushFront(&lruItem[V]{id: id, v: v})
		s.items[id] = e
		c.trimLocked(s)
	}
	return fn(e.Value.(*lruItem[V]).v)
}

// dropIf forgets id's entry, dirty or not, when stale reports it is.
func (c *lru[V]) dropIf(id snowflake.ID, stale func(V) bool) {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[id]; ok && stale(e.Value.(*lruItem[V]).v) {
		s.order.Remove(e)
		delete(s.items, id)
	}
}

// trimLocked evicts least recently used clean entries above capacity and
// asks for a flush if dirty ones keep the shard above it.
func (c *lru[V]) trimLocked(s *lruShard[V]) {
	for e := s.order.Back(); e != nil && s.order.Len() > c.perShard && e != s.order.Front(); {
		it := e.Value.(*lruItem[V])
		prev := e.Prev()
		if c.dirty(it.v) {
			c.pressure()
			e = prev
			continue
		}
		s.order.Remove(e)
		delete(s.items, it.id)
		e = prev
	}
}

// each runs fn on every cached entry, one shard at a time under its lock.
func (c *lru[V]) each(fn func(V)) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for e := s.order.Front(); e != nil; e = e.Next() {
			fn(e.Value.(*lruItem[V]).v)
		}
		s.mu.Unlock()
	}
}

// dropClean forgets every entry that has nothing to write.
func (c *lru[V]) dropClean() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for e := s.order.Front(); e != nil; {
			next := e.Next()
			it := e.Value.(*lruItem[V])
			if !c.dirty(it.v) {
				s.order.Remove(e)
				delete(s.items, it.id)
			}
			e = next
		}
		s.mu.Unlock()
	}
}

// peek runs fn on id's entry if it is cached, without loading it or
// changing the LRU order, and reports whether it was.
func (c *lru[V]) peek(id snowflake.ID, fn func(V)) bool {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[id]
	if ok {
		fn(e.Value.(*lruItem[V]).v)
	}
	return ok
}

// dropCleanIf forgets every clean entry whose id drop reports, and
// returns how many dirty entries drop reported (they stay).
func (c *lru[V]) dropCleanIf(drop func(snowflake.ID) bool) (dirty int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for e := s.order.Front(); e != nil; {
			next := e.Next()
			it := e.Value.(*lruItem[V])
			if drop(it.id) {
				if c.dirty(it.v) {
					dirty++
				} else {
					s.order.Remove(e)
					delete(s.items, it.id)
				}
			}
			e = next
		}
		s.mu.Unlock()
	}
	return dirty
}
