// Package relay is the in-process live.Relay of `concord dev` and unit
// tests: per-stream topics in memory. Like the Redis relay
// (relay/redisrelay) it is fire and forget: a subscriber that falls more
// than a bounded queue behind loses messages and sees the sequence gap.
package relay

import (
	"context"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// queueLimit bounds one subscription's undelivered messages.
const queueLimit = 4096

// Mem is an in-process live.Relay shared by the router and the gateways
// of one process.
type Mem struct {
	mu     sync.Mutex
	topics map[snowflake.ID]map[*sub]struct{}
}

var _ live.Relay = (*Mem)(nil)

// New returns an empty relay.
func New() *Mem { return &Mem{topics: map[snowflake.ID]map[*sub]struct{}{}} }

type sub struct {
	gate  *live.Gated // so nothing is delivered once cancel returned
	mu    sync.Mutex
	queue [][]byte
	wake  chan struct{}
	done  chan struct{}
}

// Publish implements live.Relay.
func (m *Mem) Publish(ctx context.Context, stream snowflake.ID, msg []byte) error {
	_, err := m.PublishCount(ctx, stream, msg)
	return err
}

// PublishCount implements live.CountingRelay.
func (m *Mem) PublishCount(ctx context.Context, stream snowflake.ID, msg []byte) (int, error) {
	m.mu.Lock()
	subs := make([]*sub, 0, len(m.topics[stream]))
	for s := range m.topics[stream] {
		subs = append(subs, s)
	}
	m.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		if len(s.queue) < queueLimit {
			s.queue = append(s.queue, msg)
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return len(subs), nil
}

// Subscribers returns how many subscriptions stream's topic has (the
// backbone copies one batch costs).
func (m *Mem) Subscribers(stream snowflake.ID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.topics[stream])
}

// Subscribe implements live.Relay; each subscription delivers from its
// own goroutine, in publish order.
func (m *Mem) Subscribe(ctx context.Context, stream snowflake.ID, deliver func([]byte)) (func(), error) {
	s := &sub{gate: live.NewGated(deliver), wake: make(chan struct{}, 1), done: make(chan struct{})}
	m.mu.Lock()
	if m.topics[stream] == nil {
		m.topics[stream] = map[*sub]struct{}{}
	}
	m.topics[stream][s] = struct{}{}
	m.mu.Unlock()
	go func() {
		for {
			select {
			case <-s.wake:
			case <-s.done:
				return
			}
			s.mu.Lock()
			q := s.queue
			s.queue = nil
			s.mu.Unlock()
			for _, msg := range q {
				s.gate.Deliver(msg)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.topics[stream], s)
			if len(m.topics[stream]) == 0 {
				delete(m.topics, stream)
			}
			m.mu.Unlock()
			close(s.done)
			s.gate.Stop()
		})
	}, nil
}
