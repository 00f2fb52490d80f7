package entitlement

import (
	"context"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// MemBus is a Bus inside one process (`--registry=mem` and tests): it
// keeps the latest revocation per bot and fans pushes out to watchers.
type MemBus struct {
	mu       sync.Mutex
	latest   map[snowflake.ID]Revocation
	order    []snowflake.ID
	watchers map[chan Notice]struct{}
}

var _ Bus = (*MemBus)(nil)

// NewMemBus returns an empty MemBus.
func NewMemBus() *MemBus {
	return &MemBus{latest: map[snowflake.ID]Revocation{}, watchers: map[chan Notice]struct{}{}}
}

// Publish implements Bus. A watcher whose buffer is full misses the push
// (the lease covers it), as a lost network message would.
func (b *MemBus) Publish(_ context.Context, r Revocation) error {
	if r.ID == "" {
		r.ID = NewID()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.latest[r.BotUserID]; !ok {
		b.order = append(b.order, r.BotUserID)
	}
	b.latest[r.BotUserID] = r
	for ch := range b.watchers {
		select {
		case ch <- Notice{Revocations: []Revocation{r}}:
		default:
		}
	}
	return nil
}

// Watch implements Bus.
func (b *MemBus) Watch(ctx context.Context) (<-chan Notice, error) {
	ch := make(chan Notice, 256)
	b.mu.Lock()
	snap := Notice{Snapshot: true}
	for _, id := range b.order {
		snap.Revocations = append(snap.Revocations, b.latest[id])
	}
	ch <- snap
	b.watchers[ch] = struct{}{}
	b.mu.Unlock()
	out := make(chan Notice)
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.watchers, ch)
			b.mu.Unlock()
		}()
		for {
			select {
			case n := <-ch:
				select {
				case out <- n:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
