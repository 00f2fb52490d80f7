package wiring

import (
	"context"
	"fmt"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// Seams are the cross-role seams of one process: for each interface one
// role provides and others consume, the value the consumers of this
// process use. The rule is the same in both modes: a role built in this
// process provides its in-process implementation (Provide); a consumer
// asks for the seam (Lookup, Shared) and gets that one, or — when the
// providing role runs elsewhere — the client that reaches it through
// the registry, opened once per process and closed with it (Close).
//
// The zero value is empty and ready to use; a nil *Seams provides
// nothing and opens nothing shared.
type Seams struct {
	mu      sync.Mutex
	values  map[any]any
	closers Closers
}

// Key names one seam and the type of its value. Keys compare by name and
// type, so packages declare them as package variables or build them from
// a name (RingKey).
type Key[T any] struct{ Name string }

func (k Key[T]) name() string { return k.Name }

// Provide sets the seam k of s to v: the in-process implementation a
// role built in this process offers its consumers. A later Provide
// replaces it.
func Provide[T any](s *Seams, k Key[T], v T) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[any]any{}
	}
	s.values[k] = v
}

// Lookup returns the value of seam k, and whether one was provided or
// opened.
func Lookup[T any](s *Seams, k Key[T]) (T, bool) {
	var zero T
	if s == nil {
		return zero, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[k]
	if !ok {
		return zero, false
	}
	return v.(T), true
}

// Shared returns the value of seam k, opening it with open the first
// time it is asked for: one client (a ring, a gRPC client) per process
// whichever roles use it. close, when open returns one, runs at Close.
func Shared[T any](s *Seams, k Key[T], open func() (v T, close func() error, err error)) (T, error) {
	if s == nil {
		v, _, err := open()
		return v, err
	}
	if v, ok := Lookup(s, k); ok {
		return v, nil
	}
	// open runs unlocked: it may open other seams (a client opens its
	// ring).
	v, closer, err := open()
	if err != nil {
		var zero T
		return zero, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prior, ok := s.values[k]; ok {
		// Opened meanwhile by another caller: keep the first.
		if closer != nil {
			_ = closer()
		}
		return prior.(T), nil
	}
	if s.values == nil {
		s.values = map[any]any{}
	}
	s.values[k] = v
	if closer != nil {
		s.closers.Add(closer)
	}
	return v, nil
}

// names are the names of the seams set so far.
func (s *Seams) names() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.values {
		if n, ok := k.(interface{ name() string }); ok {
			out = append(out, n.name())
		}
	}
	return out
}

// Close closes what Shared opened, in reverse order.
func (s *Seams) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	closers := s.closers
	s.closers = Closers{}
	s.mu.Unlock()
	return closers.Close()
}

// RingKey is the seam of the process's watched ring over the live nodes
// running role.
func RingKey(role string) Key[*registry.LocalRing] {
	return Key[*registry.LocalRing]{Name: "ring/" + role}
}

// Ring returns the process's watched ring over the live nodes of role in
// reg, opened once per process and closed with the seams.
func Ring(ctx context.Context, s *Seams, reg registry.Registry, role string, cfg registry.LocalRingConfig) (*registry.LocalRing, error) {
	if reg == nil {
		return nil, fmt.Errorf("role: the %s ring needs a registry", role)
	}
	return Shared(s, RingKey(role), func() (*registry.LocalRing, func() error, error) {
		r, err := registry.NewLocalRing(ctx, reg, role, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s ring: %w", role, err)
		}
		return r, func() error { r.Close(); return nil }, nil
	})
}

// RingRoster is the transport.Roster of the live nodes of a watched
// ring (the session directory's gateway nodes).
type RingRoster struct{ *registry.LocalRing }

// Nodes implements transport.Roster.
func (r RingRoster) Nodes() []registry.Node { return r.View().Nodes() }
