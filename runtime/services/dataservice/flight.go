package dataservice

import (
	"context"
	"sync"
	"time"
)

// flightGroup merges concurrent calls with the same key: the first caller
// starts the work, the others wait for its result. Unlike a plain
// singleflight, each waiter may leave on its own context, and the work
// runs on a context detached from the caller that happened to start it, so
// one impatient client never fails the rest.
//
// With linger > 0, a successful result also stays joinable for linger
// after the work finished: callers with the same key arriving in that
// window get it without new work. (Keys carry the channel's write
// generation, so a completed write still forces new work at once.)
type flightGroup[K comparable, V any] struct {
	linger time.Duration

	mu sync.Mutex
	m  map[K]*flight[V]
}

type flight[V any] struct {
	done     chan struct{}
	finished bool
	val      V
	err      error
	waiters  int // callers attached, the starter included
}

// do returns the result of fn for key, running fn only when no call with
// key is in flight (or lingering). shared reports whether the caller
// joined a call another caller started. work is the context fn runs with.
//
// A waiter returns early with ctx.Err() when ctx ends, or with stopErr
// when stop is closed (the instance is going away).
func (g *flightGroup[K, V]) do(ctx, work context.Context, stop <-chan struct{}, stopErr error, key K,
	fn func(context.Context) (V, error)) (v V, shared bool, err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[K]*flight[V])
	}
	f, ok := g.m[key]
	if ok {
		f.waiters++
	} else {
		f = &flight[V]{done: make(chan struct{}), waiters: 1}
		g.m[key] = f
		go g.run(work, key, f, fn)
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.val, ok, f.err
	case <-ctx.Done():
		return v, ok, ctx.Err()
	case <-stop:
		return v, ok, stopErr
	}
}

func (g *flightGroup[K, V]) run(work context.Context, key K, f *flight[V], fn func(context.Context) (V, error)) {
	f.val, f.err = fn(work)
	g.mu.Lock()
	f.finished = true
	close(f.done)
	if f.err != nil || g.linger <= 0 {
		g.forget(key, f)
	}
	g.mu.Unlock()
	if f.err == nil && g.linger > 0 {
		time.AfterFunc(g.linger, func() {
			g.mu.Lock()
			g.forget(key, f)
			g.mu.Unlock()
		})
	}
}

// forget removes f under key unless a newer flight replaced it; g.mu held.
func (g *flightGroup[K, V]) forget(key K, f *flight[V]) {
	if g.m[key] == f {
		delete(g.m, key)
	}
}

// waiting returns the number of callers attached to calls still running.
func (g *flightGroup[K, V]) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, f := range g.m {
		if !f.finished {
			n += f.waiters
		}
	}
	return n
}
