// Package recent is the in-process recent-comments cache of `concord dev`
// and unit tests: per stream, the newest live.RecentSize events ordered by
// seq, with expiry, plus the comment nonces. recent/redisrecent is the
// Redis adapter; recent/recenttest is the suite both pass.
package recent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Mem is an in-process live.Recent and live.Nonces.
type Mem struct {
	now func() time.Time

	mu      sync.Mutex
	streams map[snowflake.ID]*set
	nonces  map[string]nonce
}

type set struct {
	events  []live.Event // ascending by seq
	expires time.Time    // zero: never
}

type nonce struct {
	value   []byte
	expires time.Time
}

var (
	_ live.Recent = (*Mem)(nil)
	_ live.Nonces = (*Mem)(nil)
)

// New returns an empty cache.
func New() *Mem {
	return &Mem{now: time.Now, streams: map[snowflake.ID]*set{}, nonces: map[string]nonce{}}
}

func (m *Mem) setLocked(stream snowflake.ID) *set {
	s := m.streams[stream]
	if s != nil && !s.expires.IsZero() && !m.now().Before(s.expires) {
		delete(m.streams, stream)
		s = nil
	}
	return s
}

// Add implements live.Recent.
func (m *Mem) Add(ctx context.Context, stream snowflake.ID, events []live.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.setLocked(stream)
	if s == nil {
		s = &set{}
		m.streams[stream] = s
	}
	for _, ev := range events {
		i := sort.Search(len(s.events), func(i int) bool { return s.events[i].Seq >= ev.Seq })
		if i < len(s.events) && s.events[i].Seq == ev.Seq {
			s.events[i] = ev
			continue
		}
		s.events = append(s.events, live.Event{})
		copy(s.events[i+1:], s.events[i:])
		s.events[i] = ev
	}
	if n := len(s.events) - live.RecentSize; n > 0 {
		s.events = append(s.events[:0:0], s.events[n:]...)
	}
	return nil
}

// Drop implements live.Recent.
func (m *Mem) Drop(ctx context.Context, stream snowflake.ID, seq int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.setLocked(stream)
	if s == nil {
		return nil
	}
	i := sort.Search(len(s.events), func(i int) bool { return s.events[i].Seq >= seq })
	if i < len(s.events) && s.events[i].Seq == seq {
		s.events = append(s.events[:i], s.events[i+1:]...)
	}
	return nil
}

// Range implements live.Recent.
func (m *Mem) Range(ctx context.Context, stream snowflake.ID, after, before int64, n int) ([]live.Event, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: range of %d", live.ErrInvalid, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.setLocked(stream)
	if s == nil {
		return nil, nil
	}
	var out []live.Event
	for i := len(s.events) - 1; i >= 0 && len(out) < n; i-- {
		q := s.events[i].Seq
		if before > 0 && q >= before {
			continue
		}
		if q <= after {
			break
		}
		out = append(out, s.events[i])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// Expire implements live.Recent.
func (m *Mem) Expire(ctx context.Context, stream snowflake.ID, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.setLocked(stream); s != nil {
		s.expires = m.now().Add(ttl)
	}
	return nil
}

// Claim implements live.Nonces.
func (m *Mem) Claim(ctx context.Context, key string, ttl time.Duration) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if n, ok := m.nonces[key]; ok && now.Before(n.expires) {
		return n.value, false, nil
	}
	if len(m.nonces) > 100_000 {
		for k, n := range m.nonces {
			if !now.Before(n.expires) {
				delete(m.nonces, k)
			}
		}
	}
	m.nonces[key] = nonce{expires: now.Add(ttl)}
	return nil, true, nil
}

// Set implements live.Nonces.
func (m *Mem) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nonces[key] = nonce{value: append([]byte(nil), value...), expires: m.now().Add(ttl)}
	return nil
}

// Release implements live.Nonces.
func (m *Mem) Release(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nonces, key)
	return nil
}
