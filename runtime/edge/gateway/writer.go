package gateway

import (
	"bytes"
	"errors"
	"strconv"
	"syscall"
	"time"
)

// The write side of a connection. A frame for an idle connection is
// encoded and written straight away with one non-blocking write, on the
// caller's goroutine: no goroutine hand-off, no timers. When the socket
// cannot take it all (or the connection is already busy), the rest goes to
// the connection's writer goroutine, which owns the socket until its queue
// is empty and writes with a deadline. The queue is bounded; see enqueue.

// maxWriteBatch is how many bytes the writer gathers into one write.
const maxWriteBatch = 64 << 10

// signal wakes the writer. c.qmu must be held.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// handOff gives the socket to the writer goroutine, starting it the
// first time: a connection whose frames all go out inline never needs
// one until it closes. c.qmu must be held.
func (c *conn) handOff() {
	if c.busy {
		return
	}
	c.busy = true
	if !c.writerStarted && c.nc != nil {
		c.writerStarted = true
		go c.writeLoop()
	}
	c.signal()
}

// enqueue sends a dispatch: written at once if the connection is idle,
// queued otherwise. It returns false, queueing nothing, when the queue
// already holds Config.SendQueue frames.
func (c *conn) enqueue(f frame) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.closing {
		// Going away; the replay buffer keeps the frame for RESUME.
		return true
	}
	if !c.busy && !c.held && c.raw != nil {
		c.writeNow(&f)
		return true
	}
	if len(c.queue)-c.extra >= c.node.cfg.SendQueue || (c.qbytes > 0 && c.qbytes+f.size > c.node.cfg.SendQueueBytes) {
		return false
	}
	c.queue = append(c.queue, f)
	c.qbytes += f.size
	c.notePressureLocked(len(c.queue) - c.extra)
	if !c.held {
		c.handOff()
	}
	return true
}

// enqueueAll queues frames regardless of the bound: replays on RESUME and
// control frames, whose memory the replay buffer or the protocol bounds.
func (c *conn) enqueueAll(fs ...frame) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.closing {
		return
	}
	if len(fs) == 1 && !c.busy && !c.held && c.raw != nil {
		c.writeNow(&fs[0])
		return
	}
	c.queue = append(c.queue, fs...)
	c.extra += len(fs)
	if !c.held {
		c.handOff()
	}
}

// sendControl sends a complete non-dispatch gateway frame.
func (c *conn) sendControl(raw []byte) { c.enqueueAll(frame{b: &body{raw: raw}}) }

// writeNow encodes f and writes it without blocking; what the socket does
// not take is left to the writer. c.qmu must be held and the connection
// idle.
func (c *conn) writeNow(f *frame) {
	bp := c.node.getBuf()
	b, err := c.encode((*bp)[:0], f, c.comp)
	if err == nil {
		var n int
		n, err = c.tryWrite(b)
		if err == nil {
			c.node.metrics.observeDelivered(f.b, c.node.cfg.Now())
		}
		if err == nil && n < len(b) {
			c.pending = append([]byte(nil), b[n:]...)
			c.handOff()
		}
	}
	*bp = b
	c.node.putBuf(bp)
	if err != nil {
		c.node.cfg.Logger.Debug("gateway write failed", "err", err)
		c.closing, c.closeCode = true, 0
		c.handOff()
	}
}

// tryWrite writes b to the socket without waiting and returns how much it
// took.
// c.qmu must be held.
func (c *conn) tryWrite(b []byte) (int, error) {
	c.tw = tryWriteState{buf: b}
	err := c.raw.Write(c.twFunc)
	n, werr := c.tw.n, c.tw.err
	c.tw = tryWriteState{}
	if err != nil {
		return 0, err
	}
	if errors.Is(werr, syscall.EAGAIN) {
		return 0, nil
	}
	if werr != nil {
		return 0, werr
	}
	return max(n, 0), nil
}

// tryWriteState carries one tryWrite through syscall.RawConn.Write; the
// callback is made once per connection so a write allocates nothing.
type tryWriteState struct {
	buf []byte
	n   int
	err error
}

// tryWriteFunc is the RawConn.Write callback: one write attempt, retried
// only on EINTR, never waiting for the socket.
func (c *conn) tryWriteFunc(fd uintptr) bool {
	for {
		c.tw.n, c.tw.err = nbWrite(int(fd), c.tw.buf)
		if c.tw.err != syscall.EINTR {
			return true
		}
	}
}

// close asks the writer to flush the queue, send a close frame with code
// (none if code is 0) and close the socket. Later calls do nothing.
func (c *conn) close(code int, text string) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.closing {
		return
	}
	c.closing, c.closeCode, c.closeText = true, code, text
	c.releasePressureLocked()
	c.handOff()
}

// abort closes the connection without flushing its queue: used for slow
// consumers, whose socket may be stuck in a write.
func (c *conn) abort(code int, text string) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.closing {
		return
	}
	c.closing, c.closeCode, c.closeText = true, code, text
	// Drop the queue but keep pending: it is the tail of a frame already
	// partly on the wire, which must end before a close frame can follow.
	clear(c.queue)
	c.queue, c.qbytes = nil, 0
	c.aborted.Store(true)
	c.releasePressureLocked()
	c.node.metrics.closes.WithLabelValues(strconv.Itoa(code)).Inc()
	// Unblock a write stuck on a full socket buffer soon.
	if c.nc != nil {
		_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	}
	c.handOff()
}

// closeWith closes the connection with a gateway close code, counting it.
func (c *conn) closeWith(code int, text string) {
	c.node.metrics.closes.WithLabelValues(strconv.Itoa(code)).Inc()
	c.node.cfg.Logger.Debug("closing connection", "code", code, "reason", text)
	c.close(code, text)
}

// writeLoop is the connection's writer goroutine: whenever it is handed the
// socket it writes the pending bytes and the queue, then gives the socket
// back; on close it sends the close frame and closes the socket.
func (c *conn) writeLoop() {
	defer close(c.done)
	defer c.socketClosed()
	defer c.nc.Close()
	var batch []frame
	for range c.wake {
		for {
			c.qmu.Lock()
			pending := c.pending
			c.pending = nil
			comp, closing, code, text := c.comp, c.closing, c.closeCode, c.closeText
			batch = batch[:0]
			if !c.held || closing {
				batch, c.queue = c.queue, batch
				c.extra, c.qbytes = 0, 0
				if c.pressure.high {
					// The writer took the queue: it is empty again.
					c.notePressureLocked(0)
				}
			}
			if len(pending) == 0 && len(batch) == 0 {
				if closing {
					c.qmu.Unlock()
					c.writeClose(code, text)
					return
				}
				// Idle again: inline writes take over, without a deadline
				// (a held queue waits for its release to hand it back).
				_ = c.nc.SetWriteDeadline(time.Time{})
				c.busy = false
				c.qmu.Unlock()
				break
			}
			c.qmu.Unlock()
			if err := c.writeBatch(pending, batch, comp); err != nil {
				c.node.cfg.Logger.Debug("gateway write failed", "err", err)
				c.close(0, "")
				return
			}
			clear(batch)
		}
	}
}

// writeBatch writes pending bytes and then frames, gathering up to
// maxWriteBatch bytes per write.
func (c *conn) writeBatch(pending []byte, batch []frame, comp compression) error {
	if c.aborted.Load() {
		// A slow consumer: finish the frame on the wire, if the socket
		// takes it within the abort's short deadline, and nothing else.
		if len(pending) > 0 {
			_, err := c.nc.Write(pending)
			return err
		}
		return nil
	}
	bp := c.node.getBuf()
	defer c.node.putBuf(bp)
	buf := append((*bp)[:0], pending...)
	var err error
	for i := range batch {
		if c.aborted.Load() {
			return nil
		}
		if buf, err = c.encode(buf, &batch[i], comp); err != nil {
			return err
		}
		if len(buf) >= maxWriteBatch {
			if err := c.writeTimed(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	*bp = buf
	if len(buf) > 0 {
		if err := c.writeTimed(buf); err != nil {
			return err
		}
	}
	now := c.node.cfg.Now()
	for i := range batch {
		c.node.metrics.observeDelivered(batch[i].b, now)
	}
	return nil
}

// writeTimed is one blocking write bounded by Config.WriteTimeout: the
// bound is per write, as documented, so a long queue drained by a slow
// but live reader is not cut off at the batch's first deadline.
func (c *conn) writeTimed(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.node.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	return err
}

// writeClose sends a close frame (none for code 0) with a short deadline.
func (c *conn) writeClose(code int, text string) {
	if code == 0 {
		return
	}
	p := closePayload(code, text)
	b := appendFrameHeader(make([]byte, 0, 4+len(p)), wsClose, len(p))
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.nc.Write(append(b, p...))
}

// encode appends f as a WebSocket frame in the connection's compression
// and counts the bytes in concord_gateway_sent_bytes_total of its event.
// It is called by whoever owns the socket (an inline writer under c.qmu
// while idle, or the writer goroutine while busy), so the compression
// state is never shared.
func (c *conn) encode(dst []byte, f *frame, comp compression) ([]byte, error) {
	n := len(dst)
	out, err := c.encodeFrame(dst, f, comp)
	if err == nil && f.b.out != nil {
		f.b.out.Add(float64(len(out) - n))
	}
	return out, err
}

// encodeFrame is encode without the count.
func (c *conn) encodeFrame(dst []byte, f *frame, comp compression) ([]byte, error) {
	b := f.b
	if b.wsop != 0 {
		dst = appendFrameHeader(dst, b.wsop, len(b.raw))
		return append(dst, b.raw...), nil
	}
	if comp == compressNone || (comp == compressPayload && b.raw != nil) {
		if b.raw != nil {
			dst = appendFrameHeader(dst, wsText, len(b.raw))
			return append(dst, b.raw...), nil
		}
		dst = appendFrameHeader(dst, wsText, dispatchSize(b.t, f.seq, b.d))
		return appendDispatch(dst, b.t, f.seq, b.d), nil
	}
	out := b.raw
	if out == nil {
		jp := c.node.getBuf()
		defer c.node.putBuf(jp)
		*jp = appendDispatch((*jp)[:0], b.t, f.seq, b.d)
		out = *jp
	}
	var z []byte
	var err error
	if comp == compressStream || comp == compressZstdStream {
		if c.stream == nil {
			if c.stream, err = newStreamCompressor(comp); err != nil {
				return dst, err
			}
		}
		z, err = c.stream.compress(out)
	} else {
		z, err = c.node.payloadComp.compress(&c.zbuf, out)
	}
	if err != nil {
		return dst, err
	}
	dst = appendFrameHeader(dst, wsBinary, len(z))
	dst = append(dst, z...)
	if c.zbuf.Cap() > maxWriteBatch {
		c.zbuf = bytes.Buffer{}
	}
	return dst, nil
}

// getBuf returns an encoding buffer from the node's pool.
func (n *Node) getBuf() *[]byte {
	if bp, ok := n.encBufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 1024)
	return &b
}

// putBuf returns an encoding buffer to the pool; very large ones are
// dropped so that one huge frame does not pin memory.
func (n *Node) putBuf(bp *[]byte) {
	if cap(*bp) > 4*maxWriteBatch {
		return
	}
	*bp = (*bp)[:0]
	n.encBufs.Put(bp)
}
