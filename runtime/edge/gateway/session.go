package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// session is one identified gateway session: its sequence counter, its
// replay buffer and the connection it is attached to, if any. A session
// outlives its connections: it stays resumable while detached for
// Config.ReplayMaxAge.
type session struct {
	// The fields every delivery reads come first, so that they share the
	// struct's first two cache lines (deliverTargets warms them before
	// the chunk's writes; TestDeliveryFieldsLeadTheStructs holds the
	// layout).
	mu   sync.Mutex
	seq  int64
	conn *conn
	// ended: the session is over. On the old node of a hand-off, frozen
	// means the state was exported: later dispatches are dropped. On a
	// successor, an incoming session queues its dispatches unstamped in
	// pending until the old node's state is imported; imported is closed
	// then (handoff.go).
	ended    bool
	frozen   bool
	incoming bool
	replay   replayBuffer

	node      *Node
	info      event.Session
	tokenHash [sha256.Size]byte

	// expiry ends the session when it stays detached too long: an entry
	// on the node's timer wheel (wheel.go), armed with the window's gen,
	// which tells a stale firing from the current one.
	expiry   wheelEntry
	gen      uint64
	pending  []*body
	imported chan struct{}
	// moving is set by the first move of the session's events to another
	// node (a drain's HandOff or a takeover, takeover.go), so that a
	// second one does not run beside it. pulling marks the placeholder a
	// takeover registers while it asks the other nodes for the session.
	moving  bool
	pulling bool
}

// newSessionID returns 32 random hex characters, like Discord's ids.
func newSessionID() event.SessionID {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return event.SessionID(hex.EncodeToString(b[:]))
}

func hashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// dispatchLocked stamps the next sequence number on a dispatch, buffers it
// for resume and queues it to the attached connection. s.mu must be held.
// It returns the change in replay buffer bytes and true.
func (s *session) dispatchLocked(b *body, now int64) (int, bool) {
	if s.incoming {
		// Stamped after the imported state, in arrival order.
		s.pending = append(s.pending, b)
		return 0, true
	}
	s.seq++
	f := frame{seq: s.seq, b: b, at: now, size: dispatchSize(b.t, s.seq, b.d) + frameOverhead}
	delta := s.replay.push(f, s.node.limits, now)
	if c := s.conn; c != nil && !c.enqueue(f) {
		// The connection's queue passed its bound: close it resumably.
		// The replay buffer still holds what it missed.
		s.node.metrics.slowConsumerCloses.Inc()
		s.node.cfg.Logger.Info("slow consumer closed", "session_id", s.info.ID, "queued", s.node.cfg.SendQueue)
		c.abort(SlowConsumerCloseCode, "send queue full")
		s.detachLocked(c)
	}
	return delta, true
}

// warm reads the words of s and of its connection that dispatch reads
// first, without the lock, so that deliverTargets takes their cache misses
// together before its writes. The values are never used: a read racing a
// writer only warms the line, so the race detector is kept out of it.
// Only single words are read, never a slice header, which a racing append
// could tear.
//
//go:norace
func (s *session) warm() uintptr {
	w := uintptr(s.seq) + uintptr(s.replay.bytes)
	if c := s.conn; c != nil {
		w += uintptr(c.comp)
		if c.busy {
			w++
		}
	}
	return w
}

// dispatch is dispatchLocked with the lock taken; it does nothing and
// returns false once the session ended.
func (s *session) dispatch(b *body, now int64) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.frozen {
		return 0, false
	}
	return s.dispatchLocked(b, now)
}

// detachLocked forgets connection c and starts the resume window. s.mu
// must be held.
func (s *session) detachLocked(c *conn) {
	if s.conn != c || c == nil {
		return
	}
	s.conn = nil
	s.startWindowLocked()
}

// startWindowLocked (re)starts the resume window: the session ends
// Config.ReplayMaxAge from now unless attached or ended first, within
// one wheel tick after the deadline (never before). s.mu must be held.
func (s *session) startWindowLocked() {
	s.gen++
	s.node.wheel.arm(&s.expiry, s.node.cfg.ReplayMaxAge, s.expireGen, s.gen)
}

// expireGen is expire as a wheel callback: arg is the window's gen.
func (s *session) expireGen(gen uint64) { s.expire(gen) }

// attachLocked makes c the session's connection, stopping the resume
// window. s.mu must be held.
func (s *session) attachLocked(c *conn) {
	s.gen++
	s.node.wheel.stop(&s.expiry)
	s.conn = c
	c.identified.Store(true) // the identify deadline no longer applies
	c.bindSession(s.info)    // send-queue pressure is counted per application (pressure.go)
}

// connGone is called when connection c ended. A client close with 1000 or
// 1001 ends the session; anything else keeps it resumable.
func (s *session) connGone(c *conn, clientCode int) {
	if clientCode == 1000 || clientCode == 1001 {
		s.mu.Lock()
		mine := s.conn == c
		s.mu.Unlock()
		if mine {
			s.end(context.Background())
			return
		}
	}
	s.mu.Lock()
	s.detachLocked(c)
	s.mu.Unlock()
}

// expire ends the session if it is still detached in the window gen.
func (s *session) expire(gen uint64) {
	s.mu.Lock()
	stale := s.gen != gen || s.conn != nil || s.ended
	s.mu.Unlock()
	if !stale {
		s.node.cfg.Logger.Debug("resume window over", "session_id", s.info.ID)
		s.end(context.Background())
	}
}

// end finishes the session for good: it drops the buffer, removes the
// session from the node and tells the Backend. It is idempotent.
func (s *session) end(ctx context.Context) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	delta := s.finishLocked()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		c.close(CloseUnknownError, "session ended")
	}
	s.node.metrics.replayBufferBytes.Add(float64(delta))
	s.node.removeSession(s)
	s.node.backend.Disconnect(ctx, s.info)
	if p := s.node.cfg.Presence; p != nil {
		p.SessionEnded(ctx, s.info)
	}
}

// finishLocked marks the session ended, stops its expiry timer and empties
// its replay buffer, returning the buffer's change in bytes. s.mu must be
// held.
func (s *session) finishLocked() int {
	s.ended = true
	s.gen++
	s.node.wheel.stop(&s.expiry)
	return s.replay.reset()
}
