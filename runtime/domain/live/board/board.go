// Package board is the in-process live.Board of `concord dev` and unit
// tests: a key-value map with prefix watches that behave as the registry's
// (a snapshot first, then every change in order). A board made by New
// keeps nothing past the process; one made by Open also keeps its
// Persistent keys (rules, bans, stream records) in a file, written and
// synced before Put or Delete returns, while WhileAlive keys (viewer
// reports) stay in memory, as they die with the process anyway.
package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Board is an in-process live.Board. The zero value is not usable; call New.
type Board struct {
	mu       sync.Mutex
	kv       map[string][]byte
	rev      int64
	watchers map[*watcher]struct{}

	path       string              // "" keeps nothing
	persistent map[string]struct{} // keys written Persistent
}

var _ live.Board = (*Board)(nil)

// New returns an empty board.
func New() *Board {
	return &Board{kv: map[string][]byte{}, watchers: map[*watcher]struct{}{}, persistent: map[string]struct{}{}}
}

// Open returns a board that keeps its Persistent keys in the file at
// path, loading what an earlier process left there.
func Open(path string) (*Board, error) {
	b := New()
	b.path = path
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("board: read %s: %w", path, err)
	}
	var kv map[string][]byte
	if err := json.Unmarshal(raw, &kv); err != nil {
		return nil, fmt.Errorf("board: decode %s: %w", path, err)
	}
	for k, v := range kv {
		b.kv[k], b.persistent[k] = v, struct{}{}
	}
	return b, nil
}

// saveLocked writes the Persistent keys to a temporary file, syncs it
// and renames it over the board's file.
func (b *Board) saveLocked() error {
	if b.path == "" {
		return nil
	}
	kv := make(map[string][]byte, len(b.persistent))
	for k := range b.persistent {
		kv[k] = b.kv[k]
	}
	raw, err := json.Marshal(kv)
	if err != nil {
		return fmt.Errorf("board: encode: %w", err)
	}
	tmp := b.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("board: write %s: %w", tmp, err)
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return fmt.Errorf("board: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("board: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("board: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, b.path); err != nil {
		return fmt.Errorf("board: replace %s: %w", b.path, err)
	}
	if d, err := os.Open(filepath.Dir(b.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
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
func (b *Board) Put(ctx context.Context, key string, value []byte, lifetime registry.Lifetime) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", registry.ErrInvalid)
	}
	v := append([]byte(nil), value...)
	b.mu.Lock()
	defer b.mu.Unlock()
	_, was := b.persistent[key]
	if lifetime == registry.Persistent {
		b.persistent[key] = struct{}{}
	} else {
		delete(b.persistent, key)
	}
	old, had := b.kv[key]
	b.kv[key] = v
	if was || lifetime == registry.Persistent {
		if err := b.saveLocked(); err != nil {
			if had {
				b.kv[key] = old
			} else {
				delete(b.kv, key)
			}
			return err
		}
	}
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
	old, ok := b.kv[key]
	if !ok {
		return nil
	}
	delete(b.kv, key)
	if _, was := b.persistent[key]; was {
		delete(b.persistent, key)
		if err := b.saveLocked(); err != nil {
			b.kv[key], b.persistent[key] = old, struct{}{}
			return err
		}
	}
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
