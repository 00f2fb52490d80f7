package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// Frames the node sends that never change.
var (
	frameHeartbeatACK   = controlFrame(OpHeartbeatACK, "null")
	frameReconnect      = controlFrame(OpReconnect, "null")
	frameInvalidSession = controlFrame(OpInvalidSession, "false")
	resumedPayload      = []byte(`{"_trace":["concord-gateway"]}`)
)

// conn is one gateway WebSocket. Its reader runs on the HTTP handler's
// goroutine and handles client payloads in order. Frames for an idle socket
// are written at once without blocking; the rest go through a bounded
// queue to the connection's writer goroutine (writer.go), so Deliver never
// waits on a socket.
type conn struct {
	// The fields an inline write reads come first, so that they share the
	// struct's first two cache lines (see session).
	//
	// qmu guards the socket's ownership, the queue, the compression mode
	// and the close request.
	qmu  sync.Mutex
	busy bool // the writer goroutine owns the socket
	// held keeps frames queued and unwritten while an op's answer is
	// being produced (holdAnswer, answer.go).
	held    bool
	closing bool
	// writerStarted is set once the writer goroutine runs; it starts on
	// the first hand-off and ends after the close.
	writerStarted bool
	comp          compression
	raw           syscall.RawConn // nil: every frame goes through the writer
	// fd is raw's descriptor, which inline writes use directly (see
	// tryWrite); -1 without raw.
	fd   int
	node *Node
	// tw and twFunc carry inline writes; guarded by qmu.
	twFunc func(fd uintptr) bool
	tw     tryWriteState

	pending   []byte // bytes an inline write left over, written first
	queue     []frame
	extra     int // frames in queue added by enqueueAll, outside the bound
	qbytes    int // bytes of the bounded frames in queue
	closeCode int
	closeText string
	wake      chan struct{}
	pressure  pressureState
	aborted   atomic.Bool
	done      chan struct{}

	ws         *websocket.Conn
	nc         net.Conn
	apiVersion int
	resumeURL  string
	ctx        context.Context
	cancel     context.CancelFunc

	// Compression state, owned by whoever owns the socket (see encode).
	zbuf   bytes.Buffer
	stream streamCompressor
	// compLast is when the stream context last sent (UnixNano), and
	// compIdle the wheel entry that parks its encoder after
	// Config.CompressIdle without a send (compress.go); compIdleFn is
	// its callback, made once.
	compLast   int64
	compIdle   wheelEntry
	compIdleFn func(uint64)

	// Liveness, checked by the node's timer wheel (wheel.go) rather than
	// a read deadline per socket: a heartbeat is one atomic store, and the
	// wheel entry (deadline) fires about once per ZombieTimeout, re-arming
	// itself while heartbeats keep coming.
	started       time.Time
	lastHeartbeat atomic.Int64 // UnixNano of the last heartbeat (or the start)
	identified    atomic.Bool  // a session is attached (session.attachLocked)
	deadline      wheelEntry

	// Polled reading (reader.go): polled is set once at the start; rmu
	// guards rs; the reader owning rs.rbusy owns rbuf, msg and inMsg.
	polled bool
	pollID uint64
	rmu    sync.Mutex
	rs     readState
	rbuf   []byte // an incomplete frame's bytes
	msg    []byte // a fragmented message being gathered
	inMsg  bool

	// Reader-owned.
	sess      *session
	rateStart time.Time
	rateCount int
}

func newConn(n *Node, ws *websocket.Conn, apiVersion int, comp compression, resumeURL string) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	c := &conn{
		node: n, ws: ws, apiVersion: apiVersion, resumeURL: resumeURL,
		ctx: ctx, cancel: cancel, comp: comp,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		started: now, fd: -1,
	}
	c.lastHeartbeat.Store(now.UnixNano())
	if ws != nil {
		c.nc = ws.UnderlyingConn()
		if sc, ok := c.nc.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				c.setRaw(raw)
			}
		}
		// The node writes its own frames: answer pings and closes
		// through the same path instead of gorilla's writer.
		ws.SetPingHandler(func(data string) error {
			c.enqueueAll(frame{b: &body{wsop: wsPong, raw: []byte(data)}})
			return nil
		})
		ws.SetCloseHandler(func(code int, text string) error { return nil })
	}
	return c
}

// setRaw gives c its socket's raw connection and descriptor, for the
// writes that bypass the net package (writer.go).
func (c *conn) setRaw(raw syscall.RawConn) {
	fd := -1
	if err := raw.Control(func(s uintptr) { fd = int(s) }); err != nil {
		return
	}
	c.raw, c.fd, c.twFunc = raw, fd, c.tryWriteFunc
}

// liveDeadline is when the connection counts as dead: the zombie
// deadline, or the identify deadline if that is sooner and the client has
// not identified yet. It reports whether the identify deadline is the one.
func (c *conn) liveDeadline() (time.Time, bool) {
	d := time.Unix(0, c.lastHeartbeat.Load()).Add(c.node.cfg.ZombieTimeout)
	if !c.identified.Load() {
		if id := c.started.Add(c.node.cfg.IdentifyTimeout); id.Before(d) {
			return id, true
		}
	}
	return d, false
}

// armDeadline puts the connection's liveness check on the node's wheel.
func (c *conn) armDeadline() {
	d, _ := c.liveDeadline()
	c.node.wheel.arm(&c.deadline, time.Until(d), c.checkDeadline, 0)
}

// checkDeadline is the wheel callback of the liveness deadline. A client
// that heartbeated (or identified) since it was armed gets it moved to
// the new deadline; otherwise the connection is closed with 4009, which
// keeps its session resumable, as Discord does for a missed heartbeat.
// It fires within one wheel tick after the deadline, never before. It
// runs beside the reader: a payload being handled at that moment (an
// IDENTIFY right at the identify deadline, say) still completes, and the
// close follows it.
func (c *conn) checkDeadline(uint64) {
	if c.isClosing() {
		return // closing anyway; do not keep a dead connection armed
	}
	d, identify := c.liveDeadline()
	if now := time.Now(); now.Before(d) {
		c.node.wheel.arm(&c.deadline, d.Sub(now), c.checkDeadline, 0)
		return
	}
	if identify {
		c.closeWith(CloseSessionTimedOut, "identify timeout")
	} else {
		c.node.metrics.zombieCloses.Inc()
		c.closeWith(CloseSessionTimedOut, "heartbeat timeout")
	}
}

// isClosing reports whether the connection was asked to close.
func (c *conn) isClosing() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.closing
}

// readLoop reads and handles client payloads until the connection ends.
// It returns the close code the client sent, or 0.
func (c *conn) readLoop() int {
	c.armDeadline()
	defer c.node.wheel.stop(&c.deadline)
	for {
		_, r, err := c.ws.NextReader()
		if err != nil {
			return c.readError(err)
		}
		bp := c.node.readBufs.Get().(*[]byte)
		n, err := io.ReadFull(r, *bp)
		switch {
		case err == nil:
			// The payload has more than MaxPayload bytes.
			c.node.readBufs.Put(bp)
			c.closeWith(CloseDecodeError, "payload too large")
			return 0
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		default:
			c.node.readBufs.Put(bp)
			return c.readError(err)
		}
		stop := c.handle((*bp)[:n])
		c.node.readBufs.Put(bp)
		if stop {
			return 0
		}
	}
}

// heartbeat records a client heartbeat and ACKs it.
func (c *conn) heartbeat() {
	c.lastHeartbeat.Store(time.Now().UnixNano())
	c.sendControl(frameHeartbeatACK)
}

// readError handles a read failure: a client's close frame is echoed;
// anything else (the socket closed under the reader, by the wheel's
// liveness check or a close) needs nothing more. It returns the client's
// close code.
func (c *conn) readError(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		// Echo the client's close, as RFC 6455 asks; 1006 and 1015 only
		// describe a dead connection and are never sent.
		echo := ce.Code
		if echo == websocket.CloseAbnormalClosure || echo == websocket.CloseTLSHandshake {
			echo = 0
		}
		c.close(echo, "")
		return ce.Code
	}
	return 0
}

// handle processes one client payload. It returns true when the
// connection is closing.
func (c *conn) handle(b []byte) bool {
	now := c.node.cfg.Now()
	if now.Sub(c.rateStart) >= c.node.cfg.RateWindow {
		c.rateStart, c.rateCount = now, 0
	}
	c.rateCount++
	if c.rateCount > c.node.cfg.RateLimit {
		c.closeWith(CloseRateLimited, "rate limited")
		return true
	}
	if isHeartbeat(b) {
		c.heartbeat()
		return false
	}
	f, err := decodeFrame(b)
	if err != nil {
		if errors.Is(err, ErrUnknownOpcode) {
			c.closeWith(CloseUnknownOpcode, "unknown opcode")
		} else {
			c.closeWith(CloseDecodeError, "decode error")
		}
		return true
	}
	switch f.Op {
	case OpHeartbeat:
		c.heartbeat()
		return false
	case OpIdentify:
		return c.identify(f.D)
	case OpResume:
		return c.resume(f.D)
	}
	if c.sess == nil {
		c.closeWith(CloseNotAuthenticated, "not authenticated")
		return true
	}
	h := c.node.cfg.OpHandlers[f.Op]
	if h == nil {
		return false
	}
	if answeredTogether(f.Op) {
		release := c.holdAnswer()
		defer release()
	}
	if err := h.HandleOp(c.ctx, c.sess.info, f.Op, f.D); err != nil {
		var ce *CloseError
		if errors.As(err, &ce) {
			c.closeWith(ce.Code, ce.Reason)
			return true
		}
		c.node.cfg.Logger.Warn("op handler failed", "op", f.Op, "session_id", c.sess.info.ID, "err", err)
	}
	return false
}
