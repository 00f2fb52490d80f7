package gateway

import (
	"encoding/binary"
	"errors"
	"net"
	"syscall"
	"unicode/utf8"
)

// The poller-driven read side of a connection. An idle connection has no
// goroutine and no read buffer: the node's poller (poll_linux.go) learns
// that its socket is readable and calls readable, which reads into a
// pooled buffer with one non-blocking read. Heartbeats, pings and pongs,
// the only payloads an idle session sends, are handled right there; any
// other payload (IDENTIFY, RESUME, the op handlers, which may wait on the
// Backend) moves the reading to a goroutine started for it, which ends
// when the socket has nothing more to read. Bytes of an incomplete frame
// are the only per-connection read state kept between readiness events.
//
// The poller reports readiness edge-triggered, so a read that returns
// less than the buffer's size has emptied the socket: any later bytes
// raise a new event. Readiness that arrives while a reader is working is
// remembered (ragain) and the reader reads once more before it stops.

// readBufSize is the pooled read buffer's size: a heartbeat is ~20 bytes
// and an IDENTIFY a few hundred; bigger frames gather in conn.rbuf.
const readBufSize = 4096

// maxInlinePayload bounds the payloads the poller looks at itself: a
// heartbeat is unmasked into a stack array of this size to classify it.
const maxInlinePayload = 64

// readState is a polled connection's read-side bookkeeping, guarded by
// conn.rmu. The fields after it are owned by whichever reader has rbusy.
type readState struct {
	rbusy   bool // a reader (the poller inline, or a goroutine) is working
	ragain  bool // readiness arrived while rbusy
	rclosed bool // the writer closed the socket
	rend    bool // finish was started; nothing reads any more
}

// pollable reports whether nc is a plain TCP connection (possibly inside
// wrappers that expose it with NetConn and buffer nothing), whose bytes
// can be read from its file descriptor directly.
func pollable(nc net.Conn) bool {
	for range 4 {
		switch x := nc.(type) {
		case *net.TCPConn:
			return true
		case interface{ NetConn() net.Conn }:
			nc = x.NetConn()
		default:
			return false
		}
	}
	return false
}

// readable is the poller's callback: the socket has bytes (or closed).
func (c *conn) readable() {
	c.rmu.Lock()
	if c.rs.rend || c.rs.rclosed {
		c.rmu.Unlock()
		return
	}
	if c.rs.rbusy {
		c.rs.ragain = true
		c.rmu.Unlock()
		return
	}
	c.rs.rbusy = true
	c.rmu.Unlock()
	c.readRun(true)
}

// readRun reads until the socket would block. inline is true on the
// poller's goroutine, which must not wait: a payload other than a
// heartbeat continues on a new goroutine.
func (c *conn) readRun(inline bool) {
	for {
		act, code := c.pump(inline)
		switch act {
		case pumpHandOff:
			go c.readRun(false)
			return
		case pumpEnd:
			c.rmu.Lock()
			c.rs.rbusy = false
			start := !c.rs.rend
			c.rs.rend = true
			c.rmu.Unlock()
			if start {
				go c.finish(code)
			}
			return
		}
		c.rmu.Lock()
		if c.rs.ragain && !c.rs.rclosed {
			c.rs.ragain = false
			c.rmu.Unlock()
			continue
		}
		c.rs.rbusy, c.rs.ragain = false, false
		start := c.rs.rclosed && !c.rs.rend
		if start {
			c.rs.rend = true
		}
		c.rmu.Unlock()
		if start {
			go c.finish(0)
		}
		return
	}
}

// socketClosed is called by the writer once it closed the socket: the
// poller hears nothing more of it, so the connection ends here unless a
// reader is working, which ends it when it stops.
func (c *conn) socketClosed() {
	if !c.polled {
		return
	}
	c.rmu.Lock()
	c.rs.rclosed = true
	start := !c.rs.rbusy && !c.rs.rend
	if start {
		c.rs.rend = true
	}
	c.rmu.Unlock()
	if start {
		go c.finish(0)
	}
}

// finish ends a polled connection once reading stopped: what ServeHTTP
// does after readLoop for a connection read by its own goroutine.
func (c *conn) finish(code int) {
	c.node.poll.remove(c)
	c.node.wheel.stop(&c.deadline)
	c.close(0, "")
	c.cancel()
	if c.sess != nil {
		c.sess.connGone(c, code)
	}
	c.node.removeConn(c)
}

type pumpAction int

const (
	pumpIdle    pumpAction = iota // the socket is empty
	pumpHandOff                   // continue on a goroutine
	pumpEnd                       // the connection is over
)

// pump handles the bytes kept from before, then reads and handles until
// the socket is empty. It returns pumpEnd with the client's close code
// (or 0) when the connection is over.
func (c *conn) pump(inline bool) (pumpAction, int) {
	if !inline && len(c.rbuf) > 0 {
		act, code := c.consumeKept(inline)
		if act != pumpIdle {
			return act, code
		}
	}
	bp := c.node.getReadBuf()
	defer c.node.readBufs4k.Put(bp)
	buf := *bp
	for {
		n, err := c.readRaw(buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return pumpIdle, 0
		case err != nil || n == 0:
			return pumpEnd, 0 // reset, closed, or end of stream
		}
		data := buf[:n]
		if len(c.rbuf) > 0 {
			c.rbuf = append(c.rbuf, data...)
			if act, code := c.consumeKept(inline); act != pumpIdle {
				return act, code
			}
		} else {
			used, act, code := c.consume(data, inline)
			if rest := data[used:]; len(rest) > 0 {
				c.rbuf = append(c.rbuf[:0], rest...)
			}
			if act != pumpIdle {
				return act, code
			}
		}
		if n < len(buf) {
			return pumpIdle, 0 // the socket is empty (edge-triggered)
		}
	}
}

// consumeKept handles what c.rbuf holds and keeps the rest.
func (c *conn) consumeKept(inline bool) (pumpAction, int) {
	used, act, code := c.consume(c.rbuf, inline)
	rest := copy(c.rbuf, c.rbuf[used:])
	c.rbuf = c.rbuf[:rest]
	if rest == 0 && cap(c.rbuf) > readBufSize {
		c.rbuf = nil // a big frame passed; do not keep its buffer
	}
	if rest == 0 && act == pumpIdle {
		c.rbuf = nil // idle connections keep no read memory
	}
	return act, code
}

// readRaw is one non-blocking read from the socket.
func (c *conn) readRaw(b []byte) (int, error) {
	var n int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, rerr = nbRead(int(fd), b)
			if rerr != syscall.EINTR {
				return true
			}
		}
	})
	if err != nil {
		return 0, err
	}
	return max(n, 0), rerr
}

// consume parses and handles the complete client frames at the start of
// data and returns how many bytes it used. Inline, it stops (pumpHandOff)
// at the first frame that is not a heartbeat or a WebSocket control frame,
// leaving it unused.
func (c *conn) consume(data []byte, inline bool) (int, pumpAction, int) {
	used := 0
	for {
		b := data[used:]
		if len(b) < 2 {
			return used, pumpIdle, 0
		}
		fin, rsv, op := b[0]&0x80 != 0, b[0]&0x70, b[0]&0x0f
		masked, l, h := b[1]&0x80 != 0, uint64(b[1]&0x7f), 2
		switch l {
		case 126:
			if len(b) < 4 {
				return used, pumpIdle, 0
			}
			l, h = uint64(binary.BigEndian.Uint16(b[2:])), 4
		case 127:
			if len(b) < 10 {
				return used, pumpIdle, 0
			}
			l, h = binary.BigEndian.Uint64(b[2:]), 10
		}
		switch {
		case rsv != 0:
			return used, c.protocolError("reserved bits set"), 0
		case !masked:
			return used, c.protocolError("unmasked client frame"), 0
		case op >= 8 && (!fin || l > 125):
			return used, c.protocolError("bad control frame"), 0
		case op == 0 && !c.inMsg:
			return used, c.protocolError("continuation without a message"), 0
		case (op == wsText || op == wsBinary) && c.inMsg:
			return used, c.protocolError("message inside a fragmented message"), 0
		case op != 0 && op != wsText && op != wsBinary && op != wsClose && op != 9 && op != wsPong:
			return used, c.protocolError("unknown opcode"), 0
		case op < 8 && l > uint64(c.node.cfg.MaxPayload)-uint64(min(len(c.msg), c.node.cfg.MaxPayload)):
			// Compared without adding: a 64-bit length near 2^64 would wrap
			// around the message so far and pass a check written as a sum.
			c.closeWith(CloseDecodeError, "payload too large")
			return used, pumpEnd, 0
		}
		need := h + 4 + int(l)
		if inline && op < 8 && (!fin || op == 0 || l > maxInlinePayload) {
			return used, pumpHandOff, 0
		}
		if len(b) < need {
			if need > readBufSize && !inline && cap(c.rbuf) < need {
				// Room for the whole frame, so it is read in one piece.
				c.rbuf = append(make([]byte, 0, need), c.rbuf...)
			}
			return used, pumpIdle, 0
		}
		key := [4]byte(b[h : h+4])
		p := b[h+4 : need]
		if inline && op < 8 {
			var tmp [maxInlinePayload]byte
			q := tmp[:len(p)]
			copy(q, p)
			unmask(q, key)
			if !isHeartbeat(q) {
				return used, pumpHandOff, 0
			}
		}
		unmask(p, key)
		used += need
		switch op {
		case wsClose:
			return used, pumpEnd, c.clientClose(p)
		case 9: // ping
			c.enqueueAll(frame{b: &body{wsop: wsPong, raw: append([]byte(nil), p...)}})
			continue
		case wsPong:
			continue
		}
		if !fin || c.inMsg {
			c.msg = append(c.msg, p...)
			c.inMsg = !fin
			if !fin {
				continue
			}
			p = c.msg
		}
		stop := c.handle(p)
		c.msg = nil
		if stop {
			return used, pumpEnd, 0
		}
	}
}

// clientClose handles the client's close frame: a valid one is echoed,
// as RFC 6455 asks, and its code returned; an invalid one gets 1002.
func (c *conn) clientClose(p []byte) int {
	code := 1005 // no status
	if len(p) >= 2 {
		code = int(binary.BigEndian.Uint16(p))
	}
	if len(p) == 1 || len(p) >= 2 && (!validCloseCode(code) || !utf8.Valid(p[2:])) {
		c.protocolError("bad close frame")
		return 0
	}
	c.close(code, "")
	return code
}

// validCloseCode reports whether a client may send code (RFC 6455 §7.4).
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// protocolError closes the connection with 1002, as a WebSocket peer
// must on a frame it cannot accept, and ends reading.
func (c *conn) protocolError(reason string) pumpAction {
	c.node.cfg.Logger.Debug("websocket protocol error", "reason", reason)
	c.close(1002, reason)
	return pumpEnd
}

// unmask XORs p with the client's masking key.
func unmask(p []byte, key [4]byte) {
	k := binary.LittleEndian.Uint32(key[:])
	k64 := uint64(k) | uint64(k)<<32
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], binary.LittleEndian.Uint64(p[i:])^k64)
	}
	for ; i < len(p); i++ {
		p[i] ^= key[i&3]
	}
}

// getReadBuf returns a pooled read buffer of readBufSize bytes.
func (n *Node) getReadBuf() *[]byte {
	if bp, ok := n.readBufs4k.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, readBufSize)
	return &b
}
