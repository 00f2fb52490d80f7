package gateway

import (
	"bytes"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// The write side of a connection. A frame for an idle connection is
// encoded and written straight away with one non-blocking write, on the
// caller's goroutine: no goroutine hand-off, no timers. When the socket
// cannot take it all (or the connection is already busy), the rest goes to
// the connection's writer goroutine, which owns the socket until its queue
// is empty and writes with a deadline. The queue is bounded; see enqueue.

// maxWriteBatch is how many bytes the writer gathers into one write.
const maxWriteBatch = 64 << 10

// maxSegments bounds the segments of one writev, below Linux's IOV_MAX
// (1024), so that one call takes them all.
const maxSegments = 1000

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
		c.writeNow(&f, f.at) // stamped just now, by deliverTargets' chunk
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
		c.writeNow(&fs[0], 0) // a replay's stamp is its first sending
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

// writeNow writes f without blocking, in one call: the frame header and
// the session's own envelope from a pooled scratch buffer, the shared
// payload from the batch's body, uncopied. What the socket does not take
// is left to the writer. at is the time to record the write at (Unix ns),
// or 0 for the clock's. c.qmu must be held and the connection idle.
func (c *conn) writeNow(f *frame, at int64) {
	ws := c.node.getScratch()
	defer c.node.putScratch(ws)
	err := c.appendFrame(ws, f, c.comp, false)
	if err == nil {
		total := ws.total
		var n int
		n, err = c.tryWrite(ws)
		if err == nil && f.b != nil && f.b.sent != 0 {
			if at == 0 {
				at = c.node.cfg.Now().UnixNano()
			}
			c.node.metrics.observeDelivered(f.b, at)
		}
		if err == nil && n < total {
			// Rare: the socket buffer is full. The tail is copied, since
			// the compressor's output it may point into is reused.
			c.pending = ws.appendTo(nil)
			c.handOff()
		}
	}
	if err != nil {
		c.node.cfg.Logger.Debug("gateway write failed", "err", err)
		c.closing, c.closeCode = true, 0
		c.handOff()
	}
}

// tryWrite writes ws's segments to the socket in one call without
// waiting, and returns how much it took; ws is left holding the rest.
// c.qmu must be held and the connection idle.
//
// It writes on the descriptor itself, not through the net package's
// RawConn.Write, whose per-write locking of the descriptor and reset of
// its poll state read two more structures per socket (cache misses at
// thousands of sockets, measured in docs/benchmarks.md, issue 27, session
// 19). What that locking guards against cannot happen here: the socket is
// closed only by the writer goroutine as it ends, which owns the socket
// (busy) from the moment closing is set under c.qmu, and an inline write
// runs only under c.qmu with the connection idle and not closing; so the
// descriptor is open, and not another socket's, for the whole call.
func (c *conn) tryWrite(ws *writeScratch) (int, error) {
	for {
		n, err := nbWritev(c.fd, ws.segs, &ws.iov)
		if err == syscall.EINTR {
			continue
		}
		if n > 0 {
			ws.consume(n)
		}
		if err == syscall.EAGAIN {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// tryWriteState carries the writer goroutine's blocking write through
// syscall.RawConn.Write, which lets the runtime wait for the socket
// (bounded by the write deadline) until every segment is written; the
// callback is made once per connection so a write allocates nothing.
type tryWriteState struct {
	ws  *writeScratch
	err error
}

// tryWriteFunc is the RawConn.Write callback: writes, retried on EINTR,
// until ws is empty; on EAGAIN it returns false so the runtime parks the
// writer until the socket is writable.
func (c *conn) tryWriteFunc(fd uintptr) bool {
	ws := c.tw.ws
	for {
		n, err := nbWritev(int(fd), ws.segs, &ws.iov)
		if err == syscall.EINTR {
			continue
		}
		if n > 0 {
			ws.consume(n)
		}
		if err == syscall.EAGAIN {
			return false
		}
		if err != nil || ws.total == 0 {
			c.tw.err = err
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
	defer c.releaseStream()
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

// writeBatch writes pending bytes and then frames, up to maxWriteBatch
// bytes or maxSegments segments per writev. Shared payloads are not
// copied; headers, envelopes and compressed bytes (per connection anyway)
// are gathered in one pooled scratch buffer.
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
	ws := c.node.getScratch()
	defer c.node.putScratch(ws)
	ws.addShared(pending)
	for i := range batch {
		if c.aborted.Load() {
			return nil
		}
		if err := c.appendFrame(ws, &batch[i], comp, true); err != nil {
			return err
		}
		if ws.total >= maxWriteBatch || len(ws.segs) >= maxSegments {
			if err := c.writeTimed(ws); err != nil {
				return err
			}
		}
	}
	if ws.total > 0 {
		if err := c.writeTimed(ws); err != nil {
			return err
		}
	}
	var at int64 // the clock, read once if a message is among the frames
	for i := range batch {
		if b := batch[i].b; b != nil && b.sent != 0 {
			if at == 0 {
				at = c.node.cfg.Now().UnixNano()
			}
			c.node.metrics.observeDelivered(b, at)
		}
	}
	return nil
}

// writeTimed writes all of ws, blocking, bounded by Config.WriteTimeout,
// and empties it. The bound is per write, as documented, so a long queue
// drained by a slow but live reader is not cut off at the batch's first
// deadline. A socket without a raw descriptor (a wrapped connection) gets
// the segments joined into one Write.
func (c *conn) writeTimed(ws *writeScratch) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.node.cfg.WriteTimeout))
	var err error
	if c.raw != nil {
		c.tw = tryWriteState{ws: ws}
		if err = c.raw.Write(c.twFunc); err == nil {
			err = c.tw.err
		}
		c.tw = tryWriteState{}
	} else {
		bp := c.node.getBuf()
		*bp = ws.appendTo((*bp)[:0])
		_, err = c.nc.Write(*bp)
		c.node.putBuf(bp)
	}
	ws.reset()
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

// appendFrame adds f to ws as one WebSocket frame in the connection's
// compression, and counts its bytes in concord_gateway_sent_bytes_total of
// its event. An uncompressed payload is added as a segment of its own,
// shared with every other session of the batch (the envelope around it,
// with this session's sequence number, goes in the scratch buffer). A
// compressed one is the connection's own; it is referenced where it lies
// when ws is written before the next frame is compressed (ownZ false),
// else copied into the scratch buffer (ownZ true). It is called by
// whoever owns the socket (an inline writer under c.qmu while idle, or the
// writer goroutine while busy), so the compression state is never shared.
func (c *conn) appendFrame(ws *writeScratch, f *frame, comp compression, ownZ bool) error {
	before := ws.total
	err := c.appendFrameSegs(ws, f, comp, ownZ)
	if err == nil && f.b.out != nil {
		f.b.out.Add(float64(ws.total - before))
	}
	return err
}

// appendFrameSegs is appendFrame without the count.
func (c *conn) appendFrameSegs(ws *writeScratch, f *frame, comp compression, ownZ bool) error {
	b := f.b
	start := len(ws.buf)
	if b.wsop != 0 {
		ws.buf = appendFrameHeader(ws.buf, b.wsop, len(b.raw))
		ws.endOwned(start)
		ws.addShared(b.raw)
		return nil
	}
	if comp == compressNone || (comp == compressPayload && b.raw != nil) {
		if b.raw != nil {
			ws.buf = appendFrameHeader(ws.buf, wsText, len(b.raw))
			ws.endOwned(start)
			ws.addShared(b.raw)
			return nil
		}
		ws.buf = appendFrameHeader(ws.buf, wsText, dispatchSize(b.t, f.seq, b.d))
		ws.buf = appendDispatchHead(ws.buf, b.t, f.seq)
		if len(b.d) == 0 {
			ws.buf = append(ws.buf, "null}"...)
			ws.endOwned(start)
			return nil
		}
		ws.endOwned(start)
		ws.addShared(b.d)
		start = len(ws.buf)
		ws.buf = append(ws.buf, '}')
		ws.endOwned(start)
		return nil
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
			c.stream = newStreamCompressor(comp)
		}
		z, err = c.compressStream(out, b.raw != nil)
	} else {
		z, err = c.node.payloadComp.compress(&c.zbuf, out)
	}
	if err != nil {
		return err
	}
	ws.buf = appendFrameHeader(ws.buf, wsBinary, len(z))
	if ownZ {
		ws.buf = append(ws.buf, z...)
		ws.endOwned(start)
	} else {
		ws.endOwned(start)
		ws.addShared(z)
	}
	if c.zbuf.Cap() > maxWriteBatch {
		c.zbuf = bytes.Buffer{}
	}
	return nil
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

// writeScratch gathers one write: segments that either lie in its own
// buffer (headers, envelopes, compressed bytes) or are shared payloads
// referenced where they lie. Scratches are pooled per node; an idle
// connection holds none.
type writeScratch struct {
	buf   []byte
	segs  [][]byte
	total int // bytes in segs
	// open: the last segment is buf[mark:] in the array base points to,
	// so owned bytes appended next extend it rather than add a segment.
	open bool
	mark int
	base *byte
	// iov is the system call's vector (sys_*.go), kept with the scratch
	// so a write allocates none.
	iov iovecs
}

// endOwned makes buf[start:] (just appended) part of the write. Appending
// may have moved buf; segments taken earlier keep the old array alive and
// still read the bytes written there.
func (ws *writeScratch) endOwned(start int) {
	n := len(ws.buf) - start
	if n == 0 {
		return
	}
	ws.total += n
	base := unsafe.SliceData(ws.buf)
	if ws.open && ws.base == base {
		ws.segs[len(ws.segs)-1] = ws.buf[ws.mark:len(ws.buf):len(ws.buf)]
		return
	}
	ws.segs = append(ws.segs, ws.buf[start:len(ws.buf):len(ws.buf)])
	ws.open, ws.mark, ws.base = true, start, base
}

// sharedCopyBelow is the size under which a shared payload is copied
// into the scratch buffer instead of given a segment of its own. Measured
// (BenchmarkWriteFrame, one dispatch to an idle loopback socket): at 256
// bytes the copy and a single-entry write cost less than a three-entry
// writev, at 1 KiB the two are even, at 4 KiB the writev is ahead. So a
// typical small event leaves as one contiguous buffer, and a large one
// (GUILD_CREATE, a message with embeds) is not copied per session.
const sharedCopyBelow = 1024

// addShared adds p to the write as it lies, without copying it (a short p
// is copied; see sharedCopyBelow).
func (ws *writeScratch) addShared(p []byte) {
	if len(p) == 0 {
		return
	}
	if len(p) < sharedCopyBelow {
		start := len(ws.buf)
		ws.buf = append(ws.buf, p...)
		ws.endOwned(start)
		return
	}
	ws.segs = append(ws.segs, p)
	ws.total += len(p)
	ws.open = false
}

// consume drops the first n written bytes.
func (ws *writeScratch) consume(n int) {
	ws.total -= n
	i := 0
	for i < len(ws.segs) && n >= len(ws.segs[i]) {
		n -= len(ws.segs[i])
		ws.segs[i] = nil
		i++
	}
	if i < len(ws.segs) && n > 0 {
		ws.segs[i] = ws.segs[i][n:]
	}
	ws.segs = append(ws.segs[:0], ws.segs[i:]...)
	clear(ws.segs[len(ws.segs):cap(ws.segs)])
	ws.open = false
}

// appendTo appends the unwritten bytes to dst.
func (ws *writeScratch) appendTo(dst []byte) []byte {
	for _, s := range ws.segs {
		dst = append(dst, s...)
	}
	return dst
}

// reset empties ws for the next write, dropping its references to
// payloads.
func (ws *writeScratch) reset() {
	clear(ws.segs)
	ws.segs = ws.segs[:0]
	ws.buf = ws.buf[:0]
	ws.total, ws.open, ws.base = 0, false, nil
}

// getScratch returns a write scratch from the node's pool.
func (n *Node) getScratch() *writeScratch {
	if ws, ok := n.scratch.Get().(*writeScratch); ok {
		return ws
	}
	return &writeScratch{buf: make([]byte, 0, 1024), segs: make([][]byte, 0, 8)}
}

// putScratch empties ws and returns it to the pool, unless a huge batch
// grew it: that one is dropped so it does not pin memory.
func (n *Node) putScratch(ws *writeScratch) {
	if cap(ws.buf) > 4*maxWriteBatch || cap(ws.segs) > 4*maxSegments {
		return
	}
	ws.reset()
	n.scratch.Put(ws)
}
