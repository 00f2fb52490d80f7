// Package board is the in-process live.Board of `concord dev` and unit
// tests: a key-value map with prefix watches that behave as the registry's
// (a snapshot first, then every change in order). Lifetimes are accepted
// and ignored: nothing outlives the process.
package board

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/concord-chat/concord/runtime/live"
	"github.com/concord-chat/concord/runtime/registry"
)

// Board is an in-process live.Board. The zero value is not usable; call New.
type Board struct {
	mu       sync.Mutex
	kv       map[string][]byte
	rev      int64
	watchers map[*watcher]struct{}
}

var _ live.Board = (*Board)(nil)

// New returns an empty board.
func New() *Board {
	return &Board{kv: map[string][]byte{}, watchers: map[*watcher]struct{}{}}
}

type watcher struct {
	prefix string
	mu     sync.Mutex
	queue  []registry.KVUpdate
	wake   chan struct{}
}

func (w *watcher) push(u registry.KVUpdate) {
	w.mu.Lock()
	w.queue = append(w.queue, u)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Put implements live.Board.
func (b *Board) Put(ctx context.Context, key string, value []byte, _ registry.Lifetime) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", registry.ErrInvalid)
	}
	v := append([]byte(nil), value...)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.kv[key] = v
	b.rev++
	b.notifyLocked(registry.KVChange{Key: key, Value: v})
	return nil
}

// Get implements live.Board.
func (b *Board) Get(ctx context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.kv[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s", registry.ErrNotFound, key)
	}
	return append([]byte(nil), v...), nil
}

// List implements live.Board.
func (b *Board) List(ctx context.Context, prefix string) (map[string][]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range b.kv {
		if strings.HasPrefix(k, prefix) {
			out[k] = append([]byte(nil), v...)
		}
	}
	return out, nil
}

// Delete implements live.Board.
func (b *Board) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.kv[key]; !ok {
		return nil
	}
	delete(b.kv, key)
	b.rev++
	b.notifyLocked(registry.KVChange{Key: key, Deleted: true})
	return nil
}

func (b *Board) notifyLocked(c registry.KVChange) {
	for w := range b.watchers {
		if strings.HasPrefix(c.Key, w.prefix) {
			w.push(registry.KVUpdate{Changes: []registry.KVChange{c}, Revision: b.rev})
		}
	}
}

// WatchKV implements live.Board.
func (b *Board) WatchKV(ctx context.Context, prefix string) (<-chan registry.KVUpdate, error) {
	w := &watcher{prefix: prefix, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	snap := registry.KVUpdate{Snapshot: true, Revision: b.rev}
	for k, v := range b.kv {
		if strings.HasPrefix(k, prefix) {
			snap.Changes = append(snap.Changes, registry.KVChange{Key: k, Value: append([]byte(nil), v...)})
		}
	}
	w.queue = append(w.queue, snap)
	b.watchers[w] = struct{}{}
	b.mu.Unlock()
	out := make(chan registry.KVUpdate)
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.watchers, w)
			b.mu.Unlock()
		}()
		for {
			w.mu.Lock()
			q := w.queue
			w.queue = nil
			w.mu.Unlock()
			for _, u := range q {
				select {
				case out <- u:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
