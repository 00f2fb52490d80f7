package voice

import (
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// minSendQueue is the least number of frames that may wait for one
// connection's writer; a client that lets its queue fill is cut off (and
// may resume). The bound also has to hold a joiner's burst, one op 5 per
// participant already in the call, so it grows with the participant limit;
// the queue itself grows only as frames wait, so an idle connection costs
// nothing for it.
const minSendQueue = 256

// outFrame is a queued text frame, or (code != 0) the close that ends the
// connection after everything queued before it.
type outFrame struct {
	b      []byte
	code   int
	reason string
}

// wsConn is one voice gateway WebSocket with its writer goroutine.
type wsConn struct {
	ws    *websocket.Conn
	m     *metrics
	limit int

	mu      sync.Mutex
	queue   []outFrame
	closing bool
	wake    chan struct{}

	done   chan struct{}
	closed sync.Once
}

func newWSConn(ws *websocket.Conn, m *metrics, limit int) *wsConn {
	c := &wsConn{ws: ws, m: m, limit: max(limit, minSendQueue), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.writeLoop()
	return c
}

func (c *wsConn) writeLoop() {
	defer c.kill()
	var batch []outFrame
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		c.mu.Lock()
		batch, c.queue = c.queue, batch[:0]
		c.mu.Unlock()
		for _, f := range batch {
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
		clear(batch)
	}
}

func (c *wsConn) push(f outFrame) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if f.code == 0 && len(c.queue) >= c.limit {
		c.mu.Unlock()
		c.kill()
		return
	}
	if f.code != 0 {
		c.closing = true
	}
	c.queue = append(c.queue, f)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// write queues a frame; a full queue kills the connection.
func (c *wsConn) write(b []byte) { c.push(outFrame{b: b}) }

// closeWith queues a close frame with code after the frames already queued
// (a session description before a kick, say); the writer then closes.
func (c *wsConn) closeWith(code int, reason string) {
	c.mu.Lock()
	already := c.closing
	c.mu.Unlock()
	if already {
		return
	}
	c.m.closes.WithLabelValues(strconv.Itoa(code)).Inc()
	c.push(outFrame{code: code, reason: reason})
}

// kill closes the socket without a close frame (the peer is gone or slow).
func (c *wsConn) kill() {
	c.closed.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		close(c.done)
		_ = c.ws.Close()
	})
}
