package registry

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// View is one immutable state of a LocalRing: the live nodes of its role
// and the placement ring built from them.
type View struct {
	// Revision is the registry revision the view was built from.
	Revision int64
	ring     *Ring
	nodes    map[string]Node
}

// newView builds the ring from the snapshot's ring members (OnRing) and
// the pins that name a live node (draining or dedicated or not).
func newView(s Snapshot, vnodes int) *View {
	v := &View{Revision: s.Revision, nodes: make(map[string]Node, len(s.Nodes))}
	members := make([]string, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		v.nodes[n.Name] = n
		if OnRing(n) {
			members = append(members, n.Name)
		}
	}
	var pins map[uint64]string
	for id, node := range s.Pins {
		if _, live := v.nodes[node]; !live {
			continue
		}
		if pins == nil {
			pins = make(map[uint64]string)
		}
		pins[uint64(id)] = node
	}
	v.ring = NewRing(members, pins, vnodes)
	return v
}

// Owner returns the node owning guild id; ok is false when no node can.
func (v *View) Owner(id snowflake.ID) (Node, bool) {
	if v == nil {
		return Node{}, false
	}
	name, ok := v.ring.Owner(uint64(id))
	if !ok {
		return Node{}, false
	}
	n, ok := v.nodes[name]
	return n, ok
}

// Node returns the live node called name, draining or not.
func (v *View) Node(name string) (Node, bool) {
	if v == nil {
		return Node{}, false
	}
	n, ok := v.nodes[name]
	return n, ok
}

// Nodes returns every live node of the view, draining and dedicated ones
// included, sorted by name.
func (v *View) Nodes() []Node {
	if v == nil {
		return nil
	}
	out := make([]Node, 0, len(v.nodes))
	for _, n := range v.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Ring returns the placement ring.
func (v *View) Ring() *Ring {
	if v == nil {
		return nil
	}
	return v.ring
}

// Len returns the number of live nodes, draining ones included.
func (v *View) Len() int {
	if v == nil {
		return 0
	}
	return len(v.nodes)
}

// Change is a move from one View to a newer one. Changes delivered to one
// subscriber chain: each Old is the previous New, even when intermediate
// views were conflated away.
type Change struct {
	Old, New *View
}

// Moved reports whether guild id has a different owner in New than in
// Old: a gateway resubscribes the sessions of such guilds.
func (c Change) Moved(id snowflake.ID) bool {
	o, ok1 := c.Old.Owner(id)
	n, ok2 := c.New.Owner(id)
	return ok1 != ok2 || o.Name != n.Name
}

// LocalRingConfig configures a LocalRing. Zero fields take the defaults.
type LocalRingConfig struct {
	// VirtualNodes is the number of ring points per node (default
	// DefaultVirtualNodes).
	VirtualNodes int
	// Logger receives the ring's log lines (default: discard).
	Logger *slog.Logger
}

// LocalRing keeps a watched local copy of the nodes of one role and their
// placement ring. Lookups read an atomically swapped View and never block.
type LocalRing struct {
	role   string
	cfg    LocalRingConfig
	view   atomic.Pointer[View]
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch   chan Change
	last *View
}

// NewLocalRing watches role in reg and returns once the first snapshot
// has arrived (or ctx ends). The watch runs until Close.
func NewLocalRing(ctx context.Context, reg Registry, role string, cfg LocalRingConfig) (*LocalRing, error) {
	if cfg.VirtualNodes <= 0 {
		cfg.VirtualNodes = DefaultVirtualNodes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	wctx, cancel := context.WithCancel(context.Background())
	ch, err := reg.Watch(wctx, role)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("registry: watch %s: %w", role, err)
	}
	l := &LocalRing{
		role:   role,
		cfg:    cfg,
		cancel: cancel,
		done:   make(chan struct{}),
		subs:   make(map[*subscriber]struct{}),
	}
	select {
	case s, ok := <-ch:
		if !ok {
			cancel()
			return nil, fmt.Errorf("registry: watch %s ended: %w", role, ErrClosed)
		}
		l.view.Store(newView(s, cfg.VirtualNodes))
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("registry: first snapshot of %s: %w", role, ctx.Err())
	}
	go l.run(ch)
	return l, nil
}

func (l *LocalRing) run(ch <-chan Snapshot) {
	defer func() {
		l.mu.Lock()
		l.closed = true
		for s := range l.subs {
			close(s.ch)
			delete(l.subs, s)
		}
		l.mu.Unlock()
		close(l.done)
	}()
	for s := range ch {
		v := newView(s, l.cfg.VirtualNodes)
		l.cfg.Logger.Debug("ring changed", "role", l.role, "revision", s.Revision,
			"nodes", len(s.Nodes), "members", v.ring.Len())
		l.mu.Lock()
		l.view.Store(v)
		for sub := range l.subs {
			sub.publish(v)
		}
		l.mu.Unlock()
	}
}

// publish hands v to the subscriber without blocking, merging it with a
// change the subscriber has not taken yet. Only run (under l.mu) sends.
func (s *subscriber) publish(v *View) {
	c := Change{Old: s.last, New: v}
	select {
	case s.ch <- c:
	default:
		select {
		case p := <-s.ch:
			c.Old = p.Old
		default:
		}
		s.ch <- c
	}
	s.last = v
}

// View returns the current view.
func (l *LocalRing) View() *View { return l.view.Load() }

// Owner returns the node owning guild id in the current view.
func (l *LocalRing) Owner(id snowflake.ID) (Node, bool) { return l.View().Owner(id) }

// Node returns the live node called name in the current view.
func (l *LocalRing) Node(name string) (Node, bool) { return l.View().Node(name) }

// Changes returns a channel receiving every change after the call (older
// undelivered changes are merged, never dropped: a Change's Old is the
// last view the subscriber saw). It is closed when ctx ends or the
// LocalRing stops.
func (l *LocalRing) Changes(ctx context.Context) <-chan Change {
	s := &subscriber{ch: make(chan Change, 1), last: l.View()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		close(s.ch)
		return s.ch
	}
	s.last = l.View()
	l.subs[s] = struct{}{}
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.subs[s]; ok {
			delete(l.subs, s)
			close(s.ch)
		}
	})
	return s.ch
}

// Done is closed when the LocalRing has stopped following the registry.
func (l *LocalRing) Done() <-chan struct{} { return l.done }

// Close stops the watch and closes every Changes channel.
func (l *LocalRing) Close() {
	l.cancel()
	<-l.done
}
