package voice

import (
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// sendQueue bounds the frames waiting for one connection's writer; a
// client that lets it fill is cut off (and may resume).
const sendQueue = 256

// outFrame is a queued text frame, or (code != 0) the close that ends the
// connection after everything queued before it.
type outFrame struct {
	b      []byte
	code   int
	reason string
}

// wsConn is one voice gateway WebSocket with its writer goroutine.
type wsConn struct {
	ws     *websocket.Conn
	m      *metrics
	out    chan outFrame
	done   chan struct{}
	once   sync.Once
	closed sync.Once
}

func newWSConn(ws *websocket.Conn, m *metrics) *wsConn {
	c := &wsConn{ws: ws, m: m, out: make(chan outFrame, sendQueue+1), done: make(chan struct{})}
	go c.writeLoop()
	return c
}

func (c *wsConn) writeLoop() {
	defer c.kill()
	for {
		select {
		case <-c.done:
			return
		case f := <-c.out:
			deadline := time.Now().Add(10 * time.Second)
			if f.code != 0 {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(f.code, f.reason), deadline)
				return
			}
			_ = c.ws.SetWriteDeadline(deadline)
			if err := c.ws.WriteMessage(websocket.TextMessage, f.b); err != nil {
				return
			}
		}
	}
}

// write queues a frame; a full queue kills the connection.
func (c *wsConn) write(b []byte) {
	select {
	case <-c.done:
	case c.out <- outFrame{b: b}:
	default:
		c.kill()
	}
}

// closeWith queues a close frame with code after the frames already queued
// (a session description before a kick, say); the writer then closes.
func (c *wsConn) closeWith(code int, reason string) {
	c.once.Do(func() {
		c.m.closes.WithLabelValues(strconv.Itoa(code)).Inc()
		select {
		case c.out <- outFrame{code: code, reason: reason}:
		default:
			c.kill()
		}
	})
}

// kill closes the socket without a close frame (the peer is gone or slow).
func (c *wsConn) kill() {
	c.closed.Do(func() {
		close(c.done)
		_ = c.ws.Close()
	})
}
