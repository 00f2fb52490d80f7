package entitlement

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ErrInjected is the error FaultySource and FaultyBus inject.
var ErrInjected = errors.New("entitlement: injected fault")

// FaultySource wraps a Source and injects latency, a fraction of failed
// reads, or an outage (every read fails). Its zero faults pass through.
// It counts the reads it forwards.
type FaultySource struct {
	Source Source

	mu       sync.Mutex
	latency  time.Duration
	failFrac float64
	down     bool
	rnd      *rand.Rand
	reads    atomic.Int64
}

var _ Source = (*FaultySource)(nil)

// NewFaultySource wraps src with no faults; seed makes the failures
// repeatable.
func NewFaultySource(src Source, seed uint64) *FaultySource {
	return &FaultySource{Source: src, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Set injects latency before every read and fails a fraction failFrac
// (0..1) of them; down fails every read at once.
func (f *FaultySource) Set(latency time.Duration, failFrac float64, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency, f.failFrac, f.down = latency, failFrac, down
}

// Reads returns how many reads reached the wrapped Source.
func (f *FaultySource) Reads() int64 { return f.reads.Load() }

// Grant implements Source.
func (f *FaultySource) Grant(ctx context.Context, botUserID snowflake.ID) (Grant, error) {
	f.mu.Lock()
	latency, down := f.latency, f.down
	fail := f.failFrac > 0 && f.rnd.Float64() < f.failFrac
	f.mu.Unlock()
	if down {
		return Grant{}, fmt.Errorf("grant of %d: source down: %w", botUserID, ErrInjected)
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Grant{}, fmt.Errorf("grant of %d: %w", botUserID, ctx.Err())
		}
	}
	if fail {
		return Grant{}, fmt.Errorf("grant of %d: %w", botUserID, ErrInjected)
	}
	f.reads.Add(1)
	return f.Source.Grant(ctx, botUserID)
}

// FaultyBus wraps a Bus: SetDropPublish loses every push (the publisher's
// write never reaches the registry) and SetDown cuts the watch (a Lost
// notice, then nothing) and fails publishes until it is restored, when
// the watch lists again (a Snapshot).
type FaultyBus struct {
	Bus Bus

	drop  atomic.Bool
	mu    sync.Mutex
	down  bool
	state chan struct{} // closed and replaced when down changes
}

var _ Bus = (*FaultyBus)(nil)

// NewFaultyBus wraps b with no faults.
func NewFaultyBus(b Bus) *FaultyBus { return &FaultyBus{Bus: b, state: make(chan struct{})} }

// SetDropPublish makes Publish drop (or stop dropping) every push while
// reporting success, as a lost message would.
func (f *FaultyBus) SetDropPublish(drop bool) { f.drop.Store(drop) }

// SetDown cuts or restores the registry behind the Bus.
func (f *FaultyBus) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == down {
		return
	}
	f.down = down
	close(f.state)
	f.state = make(chan struct{})
}

// current returns the down flag and the channel closed at its next change.
func (f *FaultyBus) current() (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down, f.state
}

// Publish implements Bus.
func (f *FaultyBus) Publish(ctx context.Context, r Revocation) error {
	if down, _ := f.current(); down {
		return fmt.Errorf("publish revocation: registry down: %w", ErrInjected)
	}
	if f.drop.Load() {
		return nil
	}
	return f.Bus.Publish(ctx, r)
}

// Watch implements Bus.
func (f *FaultyBus) Watch(ctx context.Context) (<-chan Notice, error) {
	out := make(chan Notice, 16)
	send := func(n Notice) bool {
		select {
		case out <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			down, changed := f.current()
			if down {
				if !send(Notice{Lost: true}) {
					return
				}
				select {
				case <-changed:
					continue
				case <-ctx.Done():
					return
				}
			}
			wctx, cancel := context.WithCancel(ctx)
			in, err := f.Bus.Watch(wctx)
			if err != nil {
				cancel()
				return
			}
			f.forward(ctx, in, changed, send)
			cancel()
		}
	}()
	return out, nil
}

// forward copies notices until the inner watch ends or the fault state
// changes.
func (f *FaultyBus) forward(ctx context.Context, in <-chan Notice, changed <-chan struct{}, send func(Notice) bool) {
	for {
		select {
		case n, ok := <-in:
			if !ok || !send(n) {
				return
			}
		case <-changed:
			return
		case <-ctx.Done():
			return
		}
	}
}
