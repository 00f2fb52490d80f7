package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Relay holds the slices of every guild whose owner hands sessions to it.
//
// A slice lives as long as its owner's stream: an owner that stops
// running the guild sends Drop, but one whose process is killed sends
// nothing. Entries that arrive over a connection are applied through a
// Stream, and each slice remembers the stream that last carried its
// owner's entries; when that stream ends and no entry of the owner
// arrives on another one within the lease (Stream.End), the relay drops
// the slice. The guild's next owner re-registers its sessions with a
// snapshot of its own (which takes a slice over at once, lease or not),
// or filters them itself below the threshold; either way the dead
// owner's slice no longer holds the relay's memory.
type Relay struct {
	sink event.Sink

	mu     sync.Mutex
	slices map[snowflake.ID]*Slice
	// peers are the owner processes with streams to the relay, by the
	// name their streams give.
	peers   map[string]*peer
	streams atomic.Uint64
	// expired counts slices dropped because their owner's stream ended.
	expired atomic.Uint64
}

// NewRelay returns a relay delivering to gateway nodes through sink.
func NewRelay(sink event.Sink) *Relay {
	return &Relay{sink: sink, slices: make(map[snowflake.ID]*Slice), peers: make(map[string]*peer)}
}

// Apply applies an entry to its guild's slice (made by a snapshot). A
// Drop of the slice's owner removes the slice; a Drop for a guild the
// relay holds no slice of does nothing, and any other entry for one is
// refused with ErrBehind.
func (r *Relay) Apply(ctx context.Context, e *Entry) error {
	return r.apply(ctx, "", e)
}

// apply applies e as received from owner process via ("": not over a
// connection, never expires).
func (r *Relay) apply(ctx context.Context, via string, e *Entry) error {
	for {
		r.mu.Lock()
		x := r.slices[e.Guild]
		if x == nil {
			switch {
			case e.Drop:
				r.mu.Unlock()
				return nil
			case !e.Reset:
				// Only a snapshot starts a slice: an owner whose slice
				// this relay lost (restarted, or expired) is asked for one.
				r.mu.Unlock()
				return fmt.Errorf("guild %d: no slice on this relay: %w", e.Guild, ErrBehind)
			}
			x = NewSlice(e.Guild, r.sink)
			r.slices[e.Guild] = x
		}
		r.mu.Unlock()
		err := x.apply(ctx, via, e)
		if errors.Is(err, errDropped) {
			// Dropped by its owner after we looked it up: this entry
			// (a successor's snapshot, say) starts a fresh slice.
			r.forget(x)
			continue
		}
		if e.Drop && err == nil {
			r.forget(x)
		}
		return err
	}
}

// forget removes a dropped slice from the relay.
func (r *Relay) forget(x *Slice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slices[x.guild] == x {
		delete(r.slices, x.guild)
	}
}

// Stream is one connection from an owner process to the relay (a
// RelayNode.Slice stream): entries applied through it tie their slices to
// that process.
type Stream struct {
	r      *Relay
	client string
	ended  atomic.Bool
}

// peer is an owner process's streams to the relay.
type peer struct {
	open int
	// gen counts the process's stream ends: a lease expires only if no
	// stream of it ended or opened since.
	gen uint64
}

// Open returns a handle for a new connection's entries from the owner
// process client (any string naming it; one process may hold several
// streams at once, and reconnect). An empty client names a process of
// its own.
func (r *Relay) Open(client string) *Stream {
	if client == "" {
		client = fmt.Sprintf("stream-%d", r.streams.Add(1))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.peers[client]
	if p == nil {
		p = &peer{}
		r.peers[client] = p
	}
	p.open++
	p.gen++
	return &Stream{r: r, client: client}
}

// Apply applies an entry received on the stream, as Relay.Apply.
func (s *Stream) Apply(ctx context.Context, e *Entry) error {
	return s.r.apply(ctx, s.client, e)
}

// End tells the relay the stream ended: its owner process died, or the
// connection broke. When the process has no stream open to the relay
// lease later (an owner that is alive reconnects on its next entry), its
// slices are dropped; one that then sends an entry finds its slice gone
// and is asked for a snapshot (ErrBehind). A lease of zero or less checks
// at once. End returns at once either way; a second End does nothing.
func (s *Stream) End(lease time.Duration) {
	if s.ended.Swap(true) {
		return
	}
	r := s.r
	r.mu.Lock()
	p := r.peers[s.client]
	p.open--
	p.gen++
	gen := p.gen
	r.mu.Unlock()
	if lease <= 0 {
		r.expire(s.client, gen)
		return
	}
	time.AfterFunc(lease, func() { r.expire(s.client, gen) })
}

// expire drops the slices of owner process client when it has had no
// stream open since its stream end number gen.
func (r *Relay) expire(client string, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.peers[client]; p == nil || p.open > 0 || p.gen != gen {
		return
	}
	delete(r.peers, client)
	for g, x := range r.slices {
		if x.expire(client) {
			delete(r.slices, g)
			r.expired.Add(1)
		}
	}
}

// Expired is the number of slices the relay dropped because their
// owner's stream ended and the owner did not come back within the lease.
func (r *Relay) Expired() uint64 { return r.expired.Load() }

// Len is the number of guilds the relay holds a slice of.
func (r *Relay) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.slices)
}

// Guilds lists the guilds the relay holds a slice of.
func (r *Relay) Guilds() []snowflake.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]snowflake.ID, 0, len(r.slices))
	for g := range r.slices {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// Slice returns a guild's slice, making it if needed.
func (r *Relay) Slice(guild snowflake.ID) *Slice {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.slices[guild]
	if x == nil {
		x = NewSlice(guild, r.sink)
		r.slices[guild] = x
	}
	return x
}

// ErrRelayDown is returned by Local.Send for a relay that was stopped.
var ErrRelayDown = errors.New("fanout: relay down")

// Local is a set of relays in this process (`concord dev`, tests): each
// applies its entries in order on a goroutine of its own, so the owner's
// actor only enqueues.
type Local struct {
	mu     sync.Mutex
	relays map[string]*localRelay
}

// item is a queued entry, or a barrier (Sync) when done is set.
type item struct {
	e    *Entry
	done chan struct{}
}

type localRelay struct {
	relay *Relay
	q     chan item
	done  chan struct{}
	down  atomic.Bool
	// behind is set when an entry was refused; the next Send reports it.
	behind atomic.Bool
}

// NewLocal starts n relays named local-0 … local-(n-1), each with a queue
// of queue entries, delivering through sink.
func NewLocal(sink event.Sink, n, queue int) *Local {
	l := &Local{relays: make(map[string]*localRelay)}
	for i := range n {
		lr := &localRelay{relay: NewRelay(sink), q: make(chan item, queue), done: make(chan struct{})}
		go lr.run()
		l.relays[fmt.Sprintf("local-%d", i)] = lr
	}
	return l
}

func (lr *localRelay) run() {
	for {
		select {
		case it := <-lr.q:
			if it.done != nil {
				close(it.done)
				continue
			}
			if err := lr.relay.Apply(context.Background(), it.e); errors.Is(err, ErrBehind) {
				lr.behind.Store(true)
			}
		case <-lr.done:
			return
		}
	}
}

// Relays lists the relays that are up, in name order; every guild may use
// all of them.
func (l *Local) Relays(snowflake.ID) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, lr := range l.relays {
		if !lr.down.Load() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Send enqueues an entry for a relay, waiting while its queue is full. It
// fails with ErrRelayDown for a stopped relay and with ErrBehind once the
// relay refused an earlier entry (the owner then sends a snapshot, which
// clears it).
func (l *Local) Send(ctx context.Context, relay string, e *Entry) error {
	l.mu.Lock()
	lr := l.relays[relay]
	l.mu.Unlock()
	if lr == nil || lr.down.Load() {
		return fmt.Errorf("relay %s: %w", relay, ErrRelayDown)
	}
	if !e.Reset && lr.behind.Swap(false) {
		return fmt.Errorf("relay %s: %w", relay, ErrBehind)
	}
	select {
	case lr.q <- item{e: e}:
		return nil
	case <-lr.done:
		return fmt.Errorf("relay %s: %w", relay, ErrRelayDown)
	case <-ctx.Done():
		return fmt.Errorf("relay %s: %w", relay, ctx.Err())
	}
}

// Sync waits until every relay that is up has applied the entries sent
// before it.
func (l *Local) Sync(ctx context.Context) error {
	l.mu.Lock()
	var rs []*localRelay
	for _, lr := range l.relays {
		rs = append(rs, lr)
	}
	l.mu.Unlock()
	for _, lr := range rs {
		done := make(chan struct{})
		select {
		case lr.q <- item{done: done}:
		case <-lr.done:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-done:
		case <-lr.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Relay returns a relay by name, for tests and metrics.
func (l *Local) Relay(name string) *Relay {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lr := l.relays[name]; lr != nil {
		return lr.relay
	}
	return nil
}

// Kill stops a relay as if its process died: queued entries are dropped
// and later sends fail.
func (l *Local) Kill(name string) {
	l.mu.Lock()
	lr := l.relays[name]
	l.mu.Unlock()
	if lr != nil && !lr.down.Swap(true) {
		close(lr.done)
	}
}

// Close stops every relay.
func (l *Local) Close() {
	l.mu.Lock()
	names := make([]string, 0, len(l.relays))
	for n := range l.relays {
		names = append(names, n)
	}
	l.mu.Unlock()
	for _, n := range names {
		l.Kill(n)
	}
}
