package voice

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
)

var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	// Browsers connect from the web client's origin; admission is the
	// token, not the origin.
	CheckOrigin: func(*http.Request) bool { return true },
}

// serveWS runs one voice gateway connection: Hello, then identify or
// resume, then the session's ops until the socket ends.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	version := 4
	if v := r.URL.Query().Get("v"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 || n > 8 {
			http.Error(w, `{"message": "unsupported voice gateway version", "code": 50041}`, http.StatusBadRequest)
			return
		}
		version = n
	}
	if s.conns.Add(1) > int64(s.cfg.MaxConnections) {
		s.conns.Add(-1)
		s.m.tokensRejected.WithLabelValues("connection_limit").Inc()
		http.Error(w, `{"message": "voice server at its connection limit", "code": 0}`, http.StatusServiceUnavailable)
		return
	}
	defer s.conns.Add(-1)
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	ws.SetReadLimit(signaling.MaxFrame)
	c := newWSConn(ws, s.m, 2*s.cfg.MaxParticipants+16)
	hello, _ := signaling.Encode(signaling.OpHello, 0, signaling.Hello{
		HeartbeatInterval: float64(s.cfg.HeartbeatInterval.Milliseconds()), V: version})
	c.write(hello)

	var se *session
	// A client heartbeats every interval (discord.py: at most every 5 s);
	// two missed intervals and a margin mean it is gone.
	idle := 2*s.cfg.HeartbeatInterval + 5*time.Second
	_ = ws.SetReadDeadline(s.cfg.Now().Add(s.cfg.IdentifyTimeout))
	for {
		mt, b, err := ws.ReadMessage()
		if err != nil {
			var ne interface{ Timeout() bool }
			timeout := errors.As(err, &ne) && ne.Timeout()
			switch {
			case se == nil && timeout:
				c.closeWith(signaling.CloseNotAuthenticated, "identify timeout")
			case se == nil:
				c.kill()
			case timeout:
				se.end(signaling.CloseSessionTimeout, "heartbeat timeout")
			default:
				c.kill()
				se.detach(c, websocket.IsCloseError(err, websocket.CloseNormalClosure))
			}
			return
		}
		_ = ws.SetReadDeadline(s.cfg.Now().Add(idle))
		if mt == websocket.BinaryMessage {
			// DAVE's MLS messages; a session at protocol version 0 never
			// sends any, and nothing here reads them.
			if se == nil {
				c.closeWith(signaling.CloseNotAuthenticated, "not authenticated")
				return
			}
			continue
		}
		f, err := signaling.Decode(b)
		if err != nil {
			c.closeWith(signaling.CloseDecodeError, "decode error")
			if se != nil {
				se.detach(c, false)
			}
			return
		}
		if f.Op == signaling.OpHeartbeat {
			nonce, ack, err := signaling.Heartbeat(f.D)
			if err != nil {
				c.closeWith(signaling.CloseDecodeError, "decode error")
				if se != nil {
					se.detach(c, false)
				}
				return
			}
			var d any = nonce
			if version >= 8 {
				d = struct {
					T json.RawMessage `json:"t"`
				}{nonce}
			}
			ackFrame, _ := signaling.Encode(signaling.OpHeartbeatAck, 0, d)
			c.write(ackFrame)
			if se != nil {
				se.acked(ack)
			}
			continue
		}
		switch {
		case se == nil && f.Op == signaling.OpIdentify:
			var code int
			if se, code = s.identify(c, f.D, version); code != 0 {
				c.closeWith(code, closeReason(code))
				return
			}
		case se == nil && f.Op == signaling.OpResume:
			var code int
			if se, code = s.resume(c, f.D); code != 0 {
				c.closeWith(code, closeReason(code))
				return
			}
		case se == nil:
			c.closeWith(signaling.CloseNotAuthenticated, "not authenticated")
			return
		default:
			if code := se.handle(c, f); code != 0 {
				se.end(code, closeReason(code))
				return
			}
		}
	}
}

func closeReason(code int) string {
	switch code {
	case signaling.CloseUnknownOpcode:
		return "unknown opcode"
	case signaling.CloseDecodeError:
		return "decode error"
	case signaling.CloseNotAuthenticated:
		return "not authenticated"
	case signaling.CloseAuthFailed:
		return "authentication failed"
	case signaling.CloseAlreadyAuth:
		return "already authenticated"
	case signaling.CloseSessionInvalid:
		return "session no longer valid"
	case signaling.CloseServerNotFound:
		return "server not found"
	case signaling.CloseUnknownProtocol:
		return "unknown protocol"
	case signaling.CloseUnknownEncryption:
		return "unknown encryption mode"
	}
	return ""
}
