package voice

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// session is one user's voice gateway session: it outlives a dropped
// socket for the resume window, keeping its sequenced frames for replay.
type session struct {
	srv     *Server
	id      string
	claims  token.Claims
	tok     string
	version int
	part    *participant

	mu       sync.Mutex
	conn     *wsConn
	seq      int
	frames   []sentFrame
	speaking int
	ended    bool
	timer    *time.Timer
	// wants is the client's latest op 15, kept for a peer connection made
	// after it.
	wants *signaling.MediaSinkWants
}

type sentFrame struct {
	seq int
	b   []byte
}

// identify admits a new session, or returns the close code refusing it.
func (s *Server) identify(c *wsConn, d json.RawMessage, version int) (*session, int) {
	var id signaling.Identify
	if err := signaling.DecodeInto(d, &id); err != nil {
		return nil, signaling.CloseDecodeError
	}
	claims, err := s.verifier.Verify(id.Token, s.cfg.Now())
	if err != nil {
		reason := "invalid"
		if errors.Is(err, token.ErrExpired) {
			reason = "expired"
		} else if errors.Is(err, token.ErrSignature) {
			reason = "bad_signature"
		}
		return nil, s.reject(reason)
	}
	switch {
	case claims.Server != s.cfg.ID:
		return nil, s.reject("other_server")
	case snowflake.ID(id.ServerID) != claims.GuildID, snowflake.ID(id.UserID) != claims.UserID, id.SessionID != claims.SessionID:
		// A token is bound to one user's session in one guild.
		return nil, s.reject("claims_mismatch")
	case !s.useNonce(claims.Nonce, claims.ExpiresAt()):
		return nil, s.reject("replayed")
	}
	se := &session{srv: s, id: claims.SessionID, claims: claims, tok: id.Token, version: version}
	// A user is in one voice channel per guild: a new identify replaces
	// that user's older session (and any holding the same session id).
	s.mu.Lock()
	var stale []*session
	for _, o := range s.sessions {
		if o.id == se.id || (o.claims.GuildID == claims.GuildID && o.claims.UserID == claims.UserID) {
			stale = append(stale, o)
		}
	}
	s.mu.Unlock()
	for _, o := range stale {
		o.end(signaling.CloseSessionInvalid, "session replaced")
	}
	p := &participant{userID: claims.UserID, ssrc: s.newSSRC(), sess: se}
	mute, deaf := s.joinVoiceState(claims)
	p.mute.Store(mute)
	p.deaf.Store(deaf)
	selfMute, selfDeaf := s.joinSelfState(claims)
	p.selfMute.Store(selfMute)
	p.selfDeaf.Store(selfDeaf)
	se.part = p
	if !s.join(p, callKey{claims.GuildID, claims.ChannelID}) {
		return nil, s.reject("call_full")
	}
	se.conn = c
	s.mu.Lock()
	s.sessions[se.id] = se
	s.mu.Unlock()
	s.m.sessions.Inc()

	port := int(s.udpAddr.Port())
	if s.cfg.PublicPort != 0 {
		port = s.cfg.PublicPort
	}
	ready := signaling.Ready{SSRC: p.ssrc, IP: s.publicIP, Port: port, Modes: rtpsize.Modes,
		HeartbeatInterval: int(s.cfg.HeartbeatInterval.Milliseconds())}
	if s.rtc != nil {
		ready.ICEServers = s.iceServers(claims.UserID)
	}
	se.send(signaling.OpReady, ready)
	// Tell the newcomer who is here and which SSRC is whose (receivers map
	// SSRC to user only from op 5), and tell the others about it.
	var others []signaling.Snowflake
	for _, m := range p.call.snapshot() {
		if m == p {
			continue
		}
		others = append(others, signaling.Snowflake(m.userID))
	}
	if len(others) > 0 {
		se.send(signaling.OpClientsConnect, signaling.ClientsConnect{UserIDs: others})
	}
	for _, m := range p.call.snapshot() {
		if m == p {
			continue
		}
		se.send(signaling.OpSpeaking, m.sess.speakingFrame())
		m.sess.send(signaling.OpClientsConnect, signaling.ClientsConnect{UserIDs: []signaling.Snowflake{signaling.Snowflake(p.userID)}})
	}
	s.cfg.Logger.Debug("voice session identified", "session_id", se.id, "user_id", claims.UserID, "guild_id", claims.GuildID,
		"channel_id", claims.ChannelID, "ssrc", p.ssrc, "v", version)
	return se, 0
}

func (s *Server) reject(reason string) int {
	s.m.tokensRejected.WithLabelValues(reason).Inc()
	if reason == "call_full" {
		return signaling.CloseServerNotFound
	}
	return signaling.CloseAuthFailed
}

// resume reattaches a session to a new socket and replays what the client
// did not acknowledge.
func (s *Server) resume(c *wsConn, d json.RawMessage) (*session, int) {
	var r signaling.Resume
	if err := signaling.DecodeInto(d, &r); err != nil {
		return nil, signaling.CloseDecodeError
	}
	s.mu.Lock()
	se := s.sessions[r.SessionID]
	s.mu.Unlock()
	if se == nil {
		s.m.tokensRejected.WithLabelValues("unknown_session").Inc()
		return nil, signaling.CloseSessionInvalid
	}
	// The token must be the one the session identified with (its
	// admission window may have passed; the session is what is resumed).
	if subtle.ConstantTimeCompare([]byte(r.Token), []byte(se.tok)) != 1 || snowflake.ID(r.ServerID) != se.claims.GuildID {
		return nil, s.reject("resume_mismatch")
	}
	ack := -1
	if r.SeqAck != nil {
		ack = *r.SeqAck
	}
	if !se.attach(c, ack) {
		return nil, signaling.CloseSessionInvalid
	}
	s.m.resumes.Inc()
	return se, 0
}

// attach makes c the session's socket: Resumed, then the replay.
func (se *session) attach(c *wsConn, ack int) bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.ended {
		return false
	}
	if se.timer != nil {
		se.timer.Stop()
		se.timer = nil
	}
	if old := se.conn; old != nil && old != c {
		old.closeWith(signaling.CloseSessionInvalid, "resumed elsewhere")
	}
	se.conn = c
	resumed, _ := signaling.Encode(signaling.OpResumed, 0, nil)
	c.write(resumed)
	for _, f := range se.frames {
		if f.seq > ack {
			c.write(f.b)
		}
	}
	return true
}

// send stamps (v8) and queues a frame, keeping it for a resume.
func (se *session) send(op signaling.Op, d any) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.ended {
		return
	}
	seq := 0
	if se.version >= 8 {
		se.seq++
		seq = se.seq
	}
	b, err := signaling.Encode(op, seq, d)
	if err != nil {
		se.srv.cfg.Logger.Error("voice frame not encoded", "op", op, "err", err)
		return
	}
	if seq > 0 {
		se.frames = append(se.frames, sentFrame{seq: seq, b: b})
		if n := len(se.frames) - se.srv.cfg.ReplayFrames; n > 0 {
			se.frames = append(se.frames[:0], se.frames[n:]...)
		}
	}
	if se.conn != nil {
		se.conn.write(b)
	}
}

// acked drops replay frames the client acknowledged.
func (se *session) acked(seq int) {
	se.mu.Lock()
	defer se.mu.Unlock()
	i := 0
	for i < len(se.frames) && se.frames[i].seq <= seq {
		i++
	}
	if i > 0 {
		se.frames = append(se.frames[:0], se.frames[i:]...)
	}
}

func (se *session) speakingFrame() signaling.Speaking {
	se.mu.Lock()
	sp := se.speaking
	se.mu.Unlock()
	uid := signaling.Snowflake(se.claims.UserID)
	zero := 0
	return signaling.Speaking{Speaking: sp, Delay: &zero, SSRC: se.part.ssrc, UserID: &uid}
}

// handle runs one op of an identified session; non-zero ends it with that
// close code.
func (se *session) handle(c *wsConn, f signaling.Frame) int {
	switch f.Op {
	case signaling.OpSelectProtocol:
		return se.selectProtocol(f.D)
	case signaling.OpSpeaking:
		var sp signaling.Speaking
		if err := signaling.DecodeInto(f.D, &sp); err != nil {
			return signaling.CloseDecodeError
		}
		se.mu.Lock()
		se.speaking = sp.Speaking
		se.mu.Unlock()
		// The SSRC relayed is the one this server assigned, whatever the
		// client claimed, so no one can announce another's stream.
		frame := se.speakingFrame()
		for _, m := range se.part.call.snapshot() {
			if m != se.part {
				m.sess.send(signaling.OpSpeaking, frame)
			}
		}
		return 0
	case signaling.OpIdentify, signaling.OpResume:
		return signaling.CloseAlreadyAuth
	case signaling.OpMediaSinkWants:
		w, err := signaling.DecodeMediaSinkWants(f.D)
		if err != nil {
			return signaling.CloseDecodeError
		}
		se.mu.Lock()
		se.wants = &w
		se.mu.Unlock()
		if b := se.part.sink.Load(); b != nil {
			if p, ok := b.l.(*rtcPeer); ok {
				p.setWants(w)
			}
		}
		return 0
	case signaling.OpClientConnect, signaling.OpVoiceBackend:
		// Sent by some clients; nothing to do with them here.
		return 0
	}
	if f.Op >= signaling.OpDaveFirst && f.Op <= signaling.OpDaveLast {
		return 0 // DAVE is not offered (protocol version 0)
	}
	return signaling.CloseUnknownOpcode
}

func (se *session) selectProtocol(d json.RawMessage) int {
	var sp signaling.SelectProtocol
	if err := signaling.DecodeInto(d, &sp); err != nil {
		return signaling.CloseDecodeError
	}
	switch strings.ToLower(sp.Protocol) {
	case "udp":
		var u signaling.UDPData
		if err := signaling.DecodeInto(sp.Data, &u); err != nil {
			return signaling.CloseDecodeError
		}
		if !rtpsize.Supported(u.Mode) {
			return signaling.CloseUnknownEncryption
		}
		key := make([]byte, rtpsize.KeySize)
		if _, err := rand.Read(key); err != nil {
			return signaling.CloseServerCrashed
		}
		ci, err := rtpsize.New(u.Mode, key)
		if err != nil {
			return signaling.CloseUnknownEncryption
		}
		se.part.cipher.Store(ci)
		se.send(signaling.OpSessionDescription, signaling.SessionDescription{Mode: u.Mode, SecretKey: signaling.KeyInts(key),
			DaveProtocolVersion: 0, AudioCodec: "opus", MediaSessionID: mediaSessionID()})
		return 0
	case "webrtc":
		if se.srv.rtc == nil {
			return signaling.CloseUnknownProtocol
		}
		offer, err := sp.WebRTCSDP()
		if err != nil {
			return signaling.CloseDecodeError
		}
		answer, err := se.srv.rtc.answer(se, offer)
		if err != nil {
			se.srv.cfg.Logger.Info("voice webrtc offer refused", "session_id", se.id, "err", err)
			return signaling.CloseDecodeError
		}
		se.send(signaling.OpSessionDescription, signaling.SessionDescriptionWebRTC{SDP: answer, AudioCodec: "opus",
			VideoCodec: "VP8", DaveProtocolVersion: 0, MediaSessionID: mediaSessionID()})
		return 0
	}
	return signaling.CloseUnknownProtocol
}

func mediaSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// detach forgets a socket that ended. A clean close (1000) leaves the call
// now, and so does any close while the server drains (its calls are
// moving away); anything else keeps the session for the resume window.
func (se *session) detach(c *wsConn, clean bool) {
	se.mu.Lock()
	if se.ended || se.conn != c {
		se.mu.Unlock()
		return
	}
	se.conn = nil
	if !clean && !se.srv.draining.Load() {
		se.timer = time.AfterFunc(se.srv.cfg.ResumeWindow, func() { se.end(0, "") })
		se.mu.Unlock()
		return
	}
	se.mu.Unlock()
	se.end(0, "")
}

// end closes the session for good (code 0: no close frame) and takes its
// participant out of the call, telling the others.
func (se *session) end(code int, reason string) {
	se.mu.Lock()
	if se.ended {
		se.mu.Unlock()
		return
	}
	se.ended = true
	conn := se.conn
	se.conn = nil
	if se.timer != nil {
		se.timer.Stop()
	}
	se.mu.Unlock()
	if conn != nil {
		if code != 0 {
			conn.closeWith(code, reason)
		} else {
			conn.kill()
		}
	}
	s := se.srv
	s.mu.Lock()
	if s.sessions[se.id] == se {
		delete(s.sessions, se.id)
	}
	s.mu.Unlock()
	s.m.sessions.Dec()
	s.leave(se.part)
	for _, m := range se.part.call.snapshot() {
		m.sess.send(signaling.OpClientDisconnect, signaling.ClientDisconnect{UserID: signaling.Snowflake(se.claims.UserID)})
	}
	s.cfg.Logger.Debug("voice session ended", "session_id", se.id, "user_id", se.claims.UserID, "code", code)
}
