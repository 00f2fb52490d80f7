package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// Session hand-off: a draining node gives every session it holds to a
// successor node without losing or repeating an event.
//
//  1. The successor registers each session as incoming (PrepareSessions):
//     dispatches for it are queued there, unstamped.
//  2. The old node asks its HandoffBackend to move the session's event
//     sources to the successor (MoveSession). Each source (a guild actor,
//     a private-channel router) switches in its own order and then sends
//     this node an event.MoveMarker batch for the session, after every event it
//     sent here before the switch.
//  3. Once every marker arrived, the old node's replay buffer holds every
//     event the session will ever get here: the node freezes the session
//     and exports its sequence number and replay buffer.
//  4. The successor imports the export (ImportSessions): it takes the
//     sequence number and buffer and stamps its queued dispatches after
//     them, so sequence numbers continue without a gap. The session is
//     then resumable there for Config.ReplayMaxAge.
//  5. The old node forgets the session (without detaching it from its
//     guilds) and sends op 7 to its client, which resumes on the
//     successor. A RESUME that reaches the old node afterwards gets op 7
//     again.

// HandoffBackend is a Backend that can move a session's event stream to
// another gateway node.
type HandoffBackend interface {
	Backend
	// MoveSession makes every source of s's events send them to node to
	// from now on. Each source that sent s's events to this node sends
	// it one event.MoveMarker batch with payload moveID (a JSON string) after
	// the last of them; markers is how many. state is handed to
	// AdoptSession on the successor (for example the guilds whose move
	// failed and must be subscribed again).
	MoveSession(ctx context.Context, s event.Session, to, moveID string) (markers int, state json.RawMessage, err error)
	// ReleaseSession forgets a session that moved to another node,
	// without detaching it from its guilds.
	ReleaseSession(ctx context.Context, s event.Session)
	// AdoptSession takes over a session imported from another node, with
	// the state its MoveSession returned there. s.Node is this node.
	AdoptSession(ctx context.Context, s event.Session, state json.RawMessage) error
}

// Successor is the node a draining node hands its sessions to.
type Successor interface {
	// Name is the successor's node name, where events are moved to.
	Name() string
	// Prepare registers sessions as incoming on the successor.
	Prepare(ctx context.Context, sessions []event.Session) error
	// Import hands the sessions' final state to the successor.
	Import(ctx context.Context, sessions []SessionExport) error
}

// SessionExport is a session's state handed to a successor: its identity,
// token hash, last sequence number and replay buffer.
type SessionExport struct {
	Session   event.Session `json:"session"`
	TokenHash []byte        `json:"token_hash"`
	// Seq is the last sequence number stamped on the old node.
	Seq int64 `json:"seq"`
	// Frames are the replay buffer's dispatches, oldest first.
	Frames []ExportedFrame `json:"frames"`
	// State is what HandoffBackend.MoveSession returned.
	State json.RawMessage `json:"state,omitempty"`
}

// ExportedFrame is one buffered dispatch.
type ExportedFrame struct {
	Seq int64 `json:"s"`
	// At is when it was stamped, Unix nanoseconds.
	At int64           `json:"at"`
	T  string          `json:"t"`
	D  json.RawMessage `json:"d"`
}

// HandOffOptions tune Node.HandOff.
type HandOffOptions struct {
	// ReconnectJitter spreads the op 7s over this long (default: all at
	// once).
	ReconnectJitter time.Duration
	// MarkerTimeout bounds the wait for a session's markers (default
	// 10 s); a session whose markers do not all arrive is handed over
	// anyway, and events still on their way to this node are lost.
	MarkerTimeout time.Duration
	// Parallel is how many sessions are moved at once (default 16).
	Parallel int
}

// ErrDraining is returned by PrepareSessions and ImportSessions on a node
// that is draining or closed: it takes no sessions.
var ErrDraining = errors.New("gateway: node draining")

// handoffState is the node's hand-off bookkeeping, guarded by its mu.
type handoffState struct {
	mu sync.Mutex
	// moves are the sessions waiting for their markers.
	moves map[event.SessionID]*move
	// moved are the sessions handed to a successor.
	moved map[event.SessionID]bool
	// sessions counts hand-offs by outcome: exported, imported, failed.
	sessions *prometheus.CounterVec
	// backend is set by SetHandoffBackend.
	backend HandoffBackend
	// peers is set by SetPeers (takeover.go); takeovers counts
	// takeovers by outcome.
	peers     Peers
	takeovers *prometheus.CounterVec
}

// newHandoffState builds the bookkeeping and registers its counter.
func newHandoffState(reg prometheus.Registerer, node string) (*handoffState, error) {
	h := &handoffState{
		moves: make(map[event.SessionID]*move),
		moved: make(map[event.SessionID]bool),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "concord_gateway_handoff_sessions_total",
			Help:        "Sessions handed to a successor node (exported), taken from a draining node (imported), or whose import failed.",
			ConstLabels: prometheus.Labels{"node": node},
		}, []string{"outcome"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_gateway_session_takeovers_total",
			Help: "RESUMEs of sessions another node held, by outcome: taken (handed over to this node), unknown (no node holds it), " +
				"refused (wrong token), failed, timeout; and given (a session this node held, handed to another).",
			ConstLabels: prometheus.Labels{"node": node},
		}, []string{"outcome"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{h.sessions, h.takeovers} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("gateway: register metrics: %w", err)
			}
		}
	}
	return h, nil
}

// move counts the markers of one session's move.
type move struct {
	id   string
	got  int
	wake chan struct{}
}

// SetHandoffBackend names the HandoffBackend hand-offs use when the
// node's Backend wraps one (for example an admission layer in front of
// it); by default the Backend itself is used if it implements the
// interface. Call it before the node serves.
func (n *Node) SetHandoffBackend(hb HandoffBackend) { n.handoff.backend = hb }

// handoffBackend returns the node's HandoffBackend, or nil.
func (n *Node) handoffBackend() HandoffBackend {
	if n.handoff.backend != nil {
		return n.handoff.backend
	}
	hb, _ := n.backend.(HandoffBackend)
	return hb
}

// importWait bounds how long a RESUME for an incoming session waits for
// its import.
const importWait = 15 * time.Second

// resumeLookup finds the session a RESUME names. An incoming session is
// waited for until imported (or importWait); moved reports a session this
// node handed away, whose client must reconnect.
func (n *Node) resumeLookup(ctx context.Context, id event.SessionID) (s *session, moved bool) {
	n.handoff.mu.Lock()
	moved = n.handoff.moved[id]
	n.handoff.mu.Unlock()
	if moved {
		return nil, true
	}
	s = n.lookup(id)
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	wait, frozen, limit := s.imported, s.frozen, importWait
	if !s.incoming {
		wait = nil
	}
	if s.pulling {
		// Another RESUME of it is taking it over (takeover.go).
		limit = n.cfg.TakeoverTimeout
	}
	s.mu.Unlock()
	if frozen {
		return nil, true
	}
	if wait != nil {
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-wait:
		case <-t.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
	return s, false
}

// marker counts an event.MoveMarker batch for the moves it names.
func (n *Node) marker(b event.Batch) {
	n.handoff.mu.Lock()
	defer n.handoff.mu.Unlock()
	for _, t := range b.Targets {
		m := n.handoff.moves[t.Session]
		if m == nil || t.Variant < 0 || t.Variant >= len(b.Payloads) {
			continue
		}
		var id string
		if json.Unmarshal(b.Payloads[t.Variant], &id) != nil || id != m.id {
			continue
		}
		m.got++
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// PrepareSessions registers sessions another node is about to hand over:
// until ImportSessions, dispatches for them are queued unstamped and a
// RESUME waits. A prepared session that is never imported ends after
// Config.ReplayMaxAge. Sessions this node already holds are left alone.
func (n *Node) PrepareSessions(ctx context.Context, sessions []event.Session) error {
	if n.draining.Load() || n.closed.Load() {
		return ErrDraining
	}
	for _, info := range sessions {
		info.Node = n.cfg.Node
		s := &session{node: n, info: info, incoming: true, imported: make(chan struct{})}
		s.mu.Lock()
		n.smu.Lock()
		if n.closed.Load() {
			n.smu.Unlock()
			s.mu.Unlock()
			return ErrClosed
		}
		if n.sessions[info.ID] != nil {
			n.smu.Unlock()
			s.mu.Unlock()
			continue
		}
		n.sessions[info.ID] = s
		n.metrics.sessions.Inc()
		n.smu.Unlock()
		// An incoming session that is never imported expires like a
		// detached one.
		s.startWindowLocked()
		s.mu.Unlock()
	}
	return nil
}

// ImportSessions takes over sessions handed over by another node: each
// gets the exported sequence number and replay buffer, then the
// dispatches queued since PrepareSessions, stamped in order after them.
// The sessions are then detached and resumable here for
// Config.ReplayMaxAge. With a HandoffBackend, each is adopted.
func (n *Node) ImportSessions(ctx context.Context, exports []SessionExport) error {
	if n.closed.Load() {
		return ErrClosed
	}
	var errs []error
	for i := range exports {
		if err := n.importOne(ctx, &exports[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (n *Node) importOne(ctx context.Context, e *SessionExport) error {
	info := e.Session
	info.Node = n.cfg.Node
	if len(e.TokenHash) != len(session{}.tokenHash) {
		return fmt.Errorf("gateway: import %s: bad token hash", info.ID)
	}
	s := n.lookup(info.ID)
	if s == nil {
		// Not prepared (or expired): import it anyway; events sent
		// meanwhile are lost.
		s = &session{node: n, info: info, incoming: true, imported: make(chan struct{})}
		if !n.addSession(s) {
			return fmt.Errorf("gateway: import %s: %w", info.ID, ErrClosed)
		}
	}
	now := n.cfg.Now().UnixNano()
	s.mu.Lock()
	if !s.incoming || s.ended {
		s.mu.Unlock()
		return fmt.Errorf("gateway: import %s: session not incoming", info.ID)
	}
	s.info = info
	copy(s.tokenHash[:], e.TokenHash)
	s.seq = e.Seq
	delta := s.replay.reset()
	for _, f := range e.Frames {
		b := &body{t: f.T, d: f.D}
		delta += s.replay.push(frame{seq: f.Seq, at: f.At, b: b, size: dispatchSize(f.T, f.Seq, f.D) + frameOverhead}, n.limits, now)
	}
	s.incoming, s.pulling = false, false
	pending := s.pending
	s.pending = nil
	for _, b := range pending {
		d, _ := s.dispatchLocked(b, now)
		delta += d
	}
	close(s.imported)
	// Detached: (re)start the resume window.
	s.startWindowLocked()
	s.mu.Unlock()
	n.metrics.replayBufferBytes.Add(float64(delta))
	n.handoff.sessions.WithLabelValues("imported").Inc()
	if hb := n.handoffBackend(); hb != nil {
		if err := hb.AdoptSession(ctx, info, e.State); err != nil {
			return fmt.Errorf("gateway: adopt %s: %w", info.ID, err)
		}
	}
	n.cfg.Logger.Debug("session imported", "session_id", info.ID, "seq", e.Seq, "frames", len(e.Frames), "queued", len(pending))
	return nil
}

// HandOff drains the node into succ: it stops taking IDENTIFY, hands every
// session it holds (attached or waiting for RESUME) to succ, then sends
// op 7 to the attached clients, spread over opts.ReconnectJitter, so
// that they resume there. Sessions that identify while it runs are handed
// over too. It returns when every session was handed over and every op 7
// sent, or ctx ends; a session whose hand-off failed stays here,
// resumable, and gets op 7 as well. Without a HandoffBackend it only
// drains (see Drain).
func (n *Node) HandOff(ctx context.Context, succ Successor, opts HandOffOptions) error {
	n.draining.Store(true)
	hb := n.handoffBackend()
	if hb == nil || succ == nil {
		return n.Drain(ctx)
	}
	if opts.MarkerTimeout <= 0 {
		opts.MarkerTimeout = 10 * time.Second
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 16
	}
	var conns []*conn
	var errs []error
	tried := make(map[event.SessionID]bool)
	for ctx.Err() == nil {
		var batch []*session
		for _, s := range n.snapshot() {
			s.mu.Lock()
			skip := s.ended || s.frozen || s.incoming || tried[s.info.ID]
			s.mu.Unlock()
			if !skip {
				tried[s.info.ID] = true
				batch = append(batch, s)
			}
		}
		if len(batch) == 0 {
			break
		}
		// In chunks, so that a session is frozen only briefly before
		// its import and requests stay small.
		for i := 0; i < len(batch) && ctx.Err() == nil; i += handOffChunk {
			cs, err := n.handOffBatch(ctx, hb, succ, batch[i:min(i+handOffChunk, len(batch))], opts)
			conns = append(conns, cs...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Sessions that stayed (failed hand-offs) get op 7 too: they resume
	// here, or identify elsewhere once this node is gone.
	for _, s := range n.snapshot() {
		s.mu.Lock()
		if c := s.conn; c != nil {
			conns = append(conns, c)
		}
		s.mu.Unlock()
	}
	n.sendReconnects(ctx, conns, opts.ReconnectJitter)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: hand-off to %s: %w", succ.Name(), err)
	}
	return ctx.Err()
}

// handOffChunk is how many sessions one prepare, move and import round
// takes.
const handOffChunk = 256

// handOffBatch moves, exports and imports one batch of sessions, and
// returns the connections of those handed over.
func (n *Node) handOffBatch(ctx context.Context, hb HandoffBackend, succ Successor, batch []*session, opts HandOffOptions) ([]*conn, error) {
	infos := make([]event.Session, len(batch))
	for i, s := range batch {
		infos[i] = s.info
	}
	if err := succ.Prepare(ctx, infos); err != nil {
		return nil, fmt.Errorf("prepare %d sessions: %w", len(batch), err)
	}
	exports := make([]*SessionExport, len(batch))
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	for i, s := range batch {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			exports[i] = n.moveAndExport(ctx, hb, succ.Name(), s, opts.MarkerTimeout)
		}()
	}
	wg.Wait()
	var list []SessionExport
	var moved []*session
	for i, e := range exports {
		if e != nil {
			list = append(list, *e)
			moved = append(moved, batch[i])
		}
	}
	var conns []*conn
	const perCall = 64
	var errs []error
	for i := 0; i < len(list); i += perCall {
		j := min(i+perCall, len(list))
		if err := succ.Import(ctx, list[i:j]); err != nil {
			// The successor has the sessions or not: either way their
			// events now go there, so they cannot stay here.
			errs = append(errs, fmt.Errorf("import %d sessions: %w", j-i, err))
			n.handoff.sessions.WithLabelValues("failed").Add(float64(j - i))
		}
		for _, s := range moved[i:j] {
			if c := n.release(ctx, hb, s, true); c != nil {
				conns = append(conns, c)
			}
		}
	}
	return conns, errors.Join(errs...)
}

// moveAndExport moves one session's events to the successor, waits for
// its markers and freezes it. It returns nil when the session ended
// meanwhile or another move of it (a drain's, a takeover's) runs.
func (n *Node) moveAndExport(ctx context.Context, hb HandoffBackend, to string, s *session, wait time.Duration) *SessionExport {
	s.mu.Lock()
	if s.ended || s.frozen || s.moving || s.incoming {
		s.mu.Unlock()
		return nil
	}
	s.moving = true
	s.mu.Unlock()
	m := &move{id: newMoveID(), wake: make(chan struct{}, 1)}
	n.handoff.mu.Lock()
	n.handoff.moves[s.info.ID] = m
	n.handoff.mu.Unlock()
	defer func() {
		n.handoff.mu.Lock()
		delete(n.handoff.moves, s.info.ID)
		n.handoff.mu.Unlock()
	}()
	want, state, err := hb.MoveSession(ctx, s.info, to, m.id)
	if err != nil {
		n.cfg.Logger.Warn("session move incomplete", "session_id", s.info.ID, "to", to, "err", err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		n.handoff.mu.Lock()
		got := m.got
		n.handoff.mu.Unlock()
		if got >= want {
			break
		}
		select {
		case <-m.wake:
			continue
		case <-t.C:
			n.cfg.Logger.Warn("session move markers missing", "session_id", s.info.ID, "got", got, "want", want)
		case <-ctx.Done():
		}
		break
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	s.frozen = true
	e := &SessionExport{Session: s.info, TokenHash: append([]byte(nil), s.tokenHash[:]...), Seq: s.seq, State: state}
	held := s.replay.frames[s.replay.head:]
	e.Frames = make([]ExportedFrame, len(held))
	for i, f := range held {
		e.Frames[i] = ExportedFrame{Seq: f.seq, At: f.at, T: f.b.t, D: f.b.d}
	}
	return e
}

// release forgets a session handed to another node and returns its
// connection, if any. drained marks it moved, so that a RESUME that
// reaches this draining node gets op 7; a session taken over is not
// marked, as a later RESUME here takes it back.
func (n *Node) release(ctx context.Context, hb HandoffBackend, s *session, drained bool) *conn {
	if drained {
		n.handoff.mu.Lock()
		n.handoff.moved[s.info.ID] = true
		n.handoff.mu.Unlock()
	}
	s.mu.Lock()
	delta := s.finishLocked()
	c := s.conn
	s.mu.Unlock()
	n.metrics.replayBufferBytes.Add(float64(delta))
	n.removeSession(s)
	hb.ReleaseSession(ctx, s.info)
	n.handoff.sessions.WithLabelValues("exported").Inc()
	return c
}

// sendReconnects sends op 7 to conns, spread evenly over jitter.
func (n *Node) sendReconnects(ctx context.Context, conns []*conn, jitter time.Duration) {
	var step time.Duration
	if len(conns) > 1 {
		step = jitter / time.Duration(len(conns)-1)
	}
	for i, c := range conns {
		if i > 0 && step > 0 {
			t := time.NewTimer(step)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				step = 0
			}
		}
		c.sendControl(frameReconnect)
	}
}

// newMoveID returns a random id for one move.
func newMoveID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
