package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// Session takeover: a RESUME that reaches a node which does not hold the
// session pulls it from the node that does, with the drain's machinery
// (handoff.go) applied to one session on demand.
//
//  1. The resuming node registers a placeholder for the session id: an
//     incoming session, as PrepareSessions makes, so dispatches moved to
//     it are queued unstamped.
//  2. It asks its Peers to take the session (TakeRequest, with the hash
//     of the token the client presented). Only the holder acts
//     (TakeSession): it checks the token hash, moves the session's event
//     sources to the resuming node and waits for their markers, freezes
//     and exports the session, forgets it without detaching it from its
//     guilds, and closes the old connection if there still is one.
//  3. The resuming node imports the export (as ImportSessions does): the
//     replay buffer, the sequence number, then the queued dispatches
//     stamped after them, and adopts the subscriptions. The RESUME then
//     continues as a local one: the missed frames, then RESUMED.
//
// The client waits Config.TakeoverTimeout at most; past it, or when no
// peer holds the session or the token does not match, it gets op 9. A
// holder's answer that comes after the client gave up is still imported:
// the events already go to this node, and the session is resumable here
// for the resume window, then ends as any detached session does.

// Peers reaches the other gateway nodes of the cluster.
type Peers interface {
	// Take asks the other nodes for session req.Session; the one holding
	// it hands it to node req.To and returns its export. It returns an
	// error wrapping ErrUnknownSession when no node holds it and
	// ErrTokenMismatch when the holder refused the token.
	Take(ctx context.Context, req TakeRequest) (*SessionExport, error)
}

// TakeRequest asks a node to hand over one session.
type TakeRequest struct {
	Session event.SessionID `json:"session_id"`
	// TokenHash is the SHA-256 of the token the resuming client
	// presented; the holder hands the session over only if it matches.
	TokenHash []byte `json:"token_hash"`
	// To is the node taking the session, where its events are moved.
	To string `json:"to"`
	// MarkerWait bounds the holder's wait for the move markers
	// (HandoffBackend.MoveSession); zero means a default.
	MarkerWait time.Duration `json:"marker_wait"`
}

// ErrTokenMismatch is returned by TakeSession when the token hash does
// not match the session's: a RESUME with another token takes nothing.
var ErrTokenMismatch = errors.New("gateway: token does not match the session")

// maxMarkerWait caps TakeRequest.MarkerWait.
const maxMarkerWait = 10 * time.Second

// SetPeers lets RESUMEs of sessions this node does not hold take them
// from the other nodes. It needs a HandoffBackend (SetHandoffBackend).
// Call it before the node serves.
func (n *Node) SetPeers(p Peers) { n.handoff.peers = p }

// TakeSession hands a session this node holds to node req.To (the
// holder's side of a takeover): it moves the session's event sources
// there, exports the session once their markers arrived, forgets it and
// aborts its connection, if any. It returns ErrUnknownSession when the
// node does not hold the session (or is only asking for it itself) and
// ErrTokenMismatch when the token hash does not match, before anything
// moved.
func (n *Node) TakeSession(ctx context.Context, req TakeRequest) (*SessionExport, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	hb := n.handoffBackend()
	if hb == nil {
		return nil, fmt.Errorf("gateway: take session %s: no hand-off backend", req.Session)
	}
	if req.To == "" || req.To == n.cfg.Node {
		return nil, fmt.Errorf("gateway: take session %s: bad destination %q", req.Session, req.To)
	}
	s := n.lookup(req.Session)
	if s == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownSession, req.Session)
	}
	s.mu.Lock()
	pulling, wait := s.pulling, s.imported
	if !s.incoming {
		wait = nil
	}
	s.mu.Unlock()
	if pulling {
		// This node is itself asking for the session: the holder is
		// elsewhere. Waiting here could wait on the caller.
		return nil, fmt.Errorf("%w: %s", ErrUnknownSession, req.Session)
	}
	if wait != nil {
		// Being handed here by a draining node: take it once imported.
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("gateway: take session %s: waiting for its import: %w", req.Session, ctx.Err())
		}
	}
	s.mu.Lock()
	gone := s.ended || s.frozen || s.moving
	match := subtle.ConstantTimeCompare(req.TokenHash, s.tokenHash[:]) == 1
	s.mu.Unlock()
	if gone {
		return nil, fmt.Errorf("%w: %s", ErrUnknownSession, req.Session)
	}
	if !match {
		n.handoff.takeovers.WithLabelValues("refused").Inc()
		return nil, fmt.Errorf("%w: %s", ErrTokenMismatch, req.Session)
	}
	markerWait := req.MarkerWait
	if markerWait <= 0 || markerWait > maxMarkerWait {
		markerWait = maxMarkerWait
	}
	e := n.moveAndExport(ctx, hb, req.To, s, markerWait)
	if e == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownSession, req.Session)
	}
	// From the move on the session's events go to req.To: it lives there
	// or nowhere, whatever becomes of this answer.
	if c := n.release(ctx, hb, s, false); c != nil {
		// The old socket may be half-dead, its writes stuck: abort
		// rather than flush.
		c.abort(CloseUnknownError, "session resumed on another node")
	}
	n.handoff.takeovers.WithLabelValues("given").Inc()
	n.cfg.Logger.Info("session handed to another node for its RESUME", "session_id", req.Session, "to", req.To, "seq", e.Seq)
	return e, nil
}

// pull asks the peers for a session this node does not hold and imports
// it. It returns the session, imported and detached, or nil when no peer
// handed it over within Config.TakeoverTimeout.
func (n *Node) pull(ctx context.Context, id event.SessionID, tokenHash [32]byte) *session {
	p := n.handoff.peers
	if p == nil || n.handoffBackend() == nil || n.draining.Load() {
		// A draining node takes no session: it would have to hand it on.
		return nil
	}
	ph := &session{node: n, info: event.Session{ID: id, Node: n.cfg.Node}, incoming: true, pulling: true, imported: make(chan struct{})}
	n.smu.Lock()
	if n.closed.Load() || n.sessions[id] != nil {
		// Closed, or a concurrent RESUME of the same session is already
		// pulling it (or it just arrived): this one gives up.
		n.smu.Unlock()
		return nil
	}
	n.sessions[id] = ph
	n.metrics.sessions.Inc()
	n.smu.Unlock()

	bound := n.cfg.TakeoverTimeout
	done := make(chan string, 1)
	go func() {
		// The holder gets longer than the client waits: an answer that
		// comes late is imported all the same (see above).
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*bound)
		defer cancel()
		outcome := "taken"
		e, err := p.Take(pctx, TakeRequest{Session: id, TokenHash: tokenHash[:], To: n.cfg.Node, MarkerWait: bound / 2})
		if err == nil {
			// One line per takeover on each side (the holder logs the
			// hand-over), so a RESUME that landed on another node behind
			// a balancer shows in the logs, not only in the counter.
			n.cfg.Logger.Info("session taken over from another node for its RESUME", "session_id", id, "from", e.Session.Node, "seq", e.Seq, "frames", len(e.Frames))
			if err = n.importOne(pctx, e); err != nil && !n.imported(ph) {
				outcome = "failed"
			} else if err != nil {
				// Imported, but some subscription was not adopted: the
				// session is here and resumable.
				n.cfg.Logger.Warn("session taken over incompletely", "session_id", id, "err", err)
				err = nil
			}
		} else {
			switch {
			case errors.Is(err, ErrUnknownSession):
				outcome = "unknown"
			case errors.Is(err, ErrTokenMismatch):
				outcome = "refused"
			default:
				outcome = "failed"
			}
		}
		if err != nil {
			n.dropPlaceholder(ph)
			level := n.cfg.Logger.Debug
			if outcome == "failed" {
				level = n.cfg.Logger.Info
			}
			level("session takeover failed", "session_id", id, "outcome", outcome, "err", err)
		}
		n.handoff.takeovers.WithLabelValues(outcome).Inc()
		done <- outcome
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case outcome := <-done:
		if outcome != "taken" {
			return nil
		}
		return ph
	case <-t.C:
		n.handoff.takeovers.WithLabelValues("timeout").Inc()
		n.cfg.Logger.Info("session takeover timed out", "session_id", id, "after", bound)
		return nil
	case <-ctx.Done():
		return nil
	}
}

// imported reports whether an incoming session has been imported.
func (n *Node) imported(s *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.incoming
}

// dropPlaceholder forgets a takeover's placeholder whose session did not
// come: the dispatches queued for it are dropped, and a RESUME waiting
// for it (resumeLookup) finds it ended.
func (n *Node) dropPlaceholder(s *session) {
	s.mu.Lock()
	if !s.incoming || s.ended {
		s.mu.Unlock()
		return
	}
	s.finishLocked()
	s.pending = nil
	s.mu.Unlock()
	// Gone from the node before the waiters wake, so that their client's
	// next RESUME asks the peers again.
	n.removeSession(s)
	close(s.imported)
}
