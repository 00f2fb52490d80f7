package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// identifyCloseCode maps an IDENTIFY failure to its close code.
func identifyCloseCode(err error) int {
	switch {
	case errors.Is(err, ErrAuthenticationFailed):
		return CloseAuthenticationFailed
	case errors.Is(err, ErrInvalidIntents):
		return CloseInvalidIntents
	case errors.Is(err, ErrDisallowedIntents):
		return CloseDisallowedIntents
	case errors.Is(err, ErrInvalidShard):
		return CloseInvalidShard
	case errors.Is(err, ErrShardingRequired):
		return CloseShardingRequired
	case errors.Is(err, ErrDecode):
		return CloseDecodeError
	default:
		return CloseUnknownError
	}
}

// identify handles op 2: it asks the Backend, subscribes the new session
// and then sends READY (seq 1) followed by what arrived meanwhile. It returns true when the connection closes.
func (c *conn) identify(d json.RawMessage) bool {
	n := c.node
	if c.sess != nil {
		c.closeWith(CloseAlreadyAuthenticated, "already authenticated")
		return true
	}
	if n.draining.Load() || n.closed.Load() {
		// A draining node takes no new sessions; the client identifies
		// again, elsewhere once the node is out of rotation.
		c.invalidSession()
		return false
	}
	id, err := decodeIdentify(d)
	if err == nil && id.Intents&^KnownIntents != 0 {
		err = ErrInvalidIntents
	}
	if err == nil && id.Token == "" {
		err = ErrAuthenticationFailed
	}
	if err != nil {
		c.closeWith(identifyCloseCode(err), err.Error())
		return true
	}
	info := event.Session{
		ID:         newSessionID(),
		Intents:    id.Intents,
		ShardID:    id.ShardID,
		ShardCount: id.ShardCount,
		Node:       n.cfg.Node,

		LargeThreshold: id.LargeThreshold,
	}
	ready, err := n.backend.Identify(c.ctx, id.Token, info)
	if errors.Is(err, ErrIdentifyRateLimited) {
		n.cfg.Logger.Debug("identify not admitted", "err", err)
		c.invalidSession()
		return false
	}
	if err != nil {
		code := identifyCloseCode(err)
		if code == CloseDecodeError {
			code = CloseUnknownError
		}
		n.cfg.Logger.Debug("identify refused", "code", code, "err", err)
		c.closeWith(code, "identify refused")
		return true
	}
	info.UserID, info.Bot = ready.UserID, ready.Bot
	payload, err := buildReady(ready, info, id.HasShard, c.apiVersion, c.resumeURL)
	if err != nil {
		n.cfg.Logger.Error("ready failed", "err", err)
		c.closeWith(CloseUnknownError, "ready failed")
		return true
	}
	if id.Compress {
		c.qmu.Lock()
		if c.comp == compressNone {
			c.comp = compressPayload
		}
		c.qmu.Unlock()
	}
	// The session is visible to Deliver before it subscribes, but held
	// (incoming): what the guild tier sends while the subscriptions run
	// (each guild's GUILD_CREATE, its events after the attach) queues
	// unstamped, and READY (seq 1) is stamped only once Subscribe
	// returned, ahead of the queue. A client acting on READY thus finds
	// every guild subscribed, and nothing sent in between is lost.
	s := &session{node: n, info: info, tokenHash: hashToken(id.Token), incoming: true, imported: make(chan struct{})}
	s.mu.Lock()
	if !n.addSession(s) {
		s.mu.Unlock()
		c.closeWith(CloseUnknownError, "node closed")
		return true
	}
	s.attachLocked(c)
	s.mu.Unlock()
	c.sess = s
	if err := n.backend.Subscribe(c.ctx, info); err != nil {
		n.cfg.Logger.Error("subscribe failed", "session_id", info.ID, "err", err)
		c.closeWith(CloseUnknownError, "subscribe failed")
		s.end(context.Background())
		return true
	}
	now := n.cfg.Now().UnixNano()
	s.mu.Lock()
	if s.ended {
		// Ended while subscribing (the node closed, the user's sessions
		// were closed): end has closed the connection.
		s.mu.Unlock()
		return true
	}
	s.incoming = false
	delta, _ := s.dispatchLocked(&body{t: "READY", d: payload}, now)
	held := s.pending
	s.pending = nil
	for _, b := range held {
		d, _ := s.dispatchLocked(b, now)
		delta += d
	}
	close(s.imported)
	s.mu.Unlock()
	n.metrics.replayBufferBytes.Add(float64(delta))
	n.cfg.Logger.Debug("session identified", "session_id", info.ID, "user_id", info.UserID,
		"shard", info.ShardID, "shards", info.ShardCount, "os", id.OS, "held", len(held))
	// IDENTIFY's presence is the session's first presence update: it goes
	// to the presence reporter if there is one, else to the op 3 handler.
	// Clients
	// send odd shapes here (discordgo: legacy `game`, empty status), so a
	// handler error is only logged.
	if p := n.cfg.Presence; p != nil {
		p.SessionStarted(c.ctx, info, ClientInfo{OS: id.OS, Browser: id.Browser, Presence: id.Presence})
	} else if h := n.cfg.OpHandlers[OpPresenceUpdate]; h != nil && id.Presence != nil {
		if err := h.HandleOp(c.ctx, info, OpPresenceUpdate, id.Presence); err != nil {
			n.cfg.Logger.Debug("identify presence refused", "session_id", info.ID, "err", err)
		}
	}
	return false
}

// invalidSession answers op 9 d:false; the client identifies anew.
func (c *conn) invalidSession() {
	c.node.metrics.invalidSessions.Inc()
	c.sendControl(frameInvalidSession)
}

// resume handles op 6: it replays the frames after the client's seq in
// order, then dispatches RESUMED. An unknown session, a token of another
// user or a gap the buffer no longer holds gets op 9 d:false; a seq ahead
// of the session closes with 4007. It returns true when the connection
// closes.
func (c *conn) resume(d json.RawMessage) bool {
	n := c.node
	if c.sess != nil {
		c.closeWith(CloseAlreadyAuthenticated, "already authenticated")
		return true
	}
	r, err := decodeResume(d)
	if err != nil {
		c.closeWith(CloseDecodeError, err.Error())
		return true
	}
	s, moved := n.resumeLookup(c.ctx, event.SessionID(r.SessionID))
	if moved {
		// Handed to a successor (handoff.go): reconnect, elsewhere.
		c.sendControl(frameReconnect)
		return false
	}
	if s == nil {
		// Held by another node, perhaps: take it over (takeover.go).
		s = n.pull(c.ctx, event.SessionID(r.SessionID), hashToken(r.Token))
	}
	if s == nil || hashToken(r.Token) != s.tokenHash {
		c.invalidSession()
		return false
	}
	now := n.cfg.Now().UnixNano()
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		c.invalidSession()
		return false
	}
	delta := s.replay.trim(n.limits, now)
	if r.Seq > s.seq {
		s.mu.Unlock()
		n.metrics.replayBufferBytes.Add(float64(delta))
		c.closeWith(CloseInvalidSeq, "invalid seq")
		return true
	}
	missed, ok := s.replay.since(r.Seq, s.seq)
	if !ok {
		s.mu.Unlock()
		n.metrics.replayBufferBytes.Add(float64(delta))
		c.invalidSession()
		s.end(context.Background())
		return false
	}
	old := s.conn
	s.attachLocked(c)
	c.enqueueAll(missed...)
	d2, _ := s.dispatchLocked(&body{t: "RESUMED", d: resumedPayload}, now)
	delta += d2
	s.mu.Unlock()
	n.metrics.replayBufferBytes.Add(float64(delta))
	if old != nil && old != c {
		old.closeWith(CloseUnknownError, "session resumed on another connection")
	}
	c.sess = s
	n.metrics.resumes.Inc()
	n.cfg.Logger.Debug("session resumed", "session_id", s.info.ID, "replayed", len(missed))
	return false
}
