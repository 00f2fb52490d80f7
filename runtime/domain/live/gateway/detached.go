package gateway

import (
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Most viewers sit idle between comments, and a viewer served on net/http's
// connection goroutine holds that goroutine's grown stack and the
// connection's read and write buffers (about 28 KB) for as long as it
// watches. An HTTP/1.1 viewer is therefore detached: the connection is
// hijacked after the request, the response head written by hand
// (Connection: close, the body runs until the connection closes), and the
// viewer then costs one small goroutine blocked in Read (to see the client
// leave) plus a writer goroutine that exists only while frames are queued;
// its pings come with the stream's flush (hub.pingLocked), not a timer.
// HTTP/2 streams cannot be hijacked and keep the goroutine path (serve).

// detach hijacks an HTTP/1.1 connection and writes the SSE response head.
// ok false: the connection cannot be hijacked (HTTP/2), serve it in place.
// ok true with a nil conn: hijacked but the head could not be written (the
// connection is closed; nothing is left to do).
func (g *Gateway) detach(w http.ResponseWriter, r *http.Request) (net.Conn, bool) {
	if r.ProtoMajor != 1 {
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	// The server's read and write deadlines stay on a hijacked connection:
	// clear them; each write sets its own.
	if err := c.SetDeadline(time.Time{}); err != nil {
		c.Close()
		return nil, true
	}
	head := []byte("HTTP/1.1 200 OK\r\n")
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var hb headBuffer
	if err := h.Write(&hb); err != nil {
		c.Close()
		return nil, true
	}
	head = append(append(head, hb...), "\r\n"...)
	c.SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
	if _, err := c.Write(head); err != nil {
		c.Close()
		return nil, true
	}
	// Flushes write without a deadline (non-blocking); only the writer
	// goroutine sets one, and clears it when it goes idle.
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		c.Close()
		return nil, true
	}
	return c, true
}

// headBuffer collects http.Header.Write's output.
type headBuffer []byte

func (b *headBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// serveDetached joins v to h on the hijacked c and returns; the watcher
// goroutine leaves the hub and releases it when the connection closes.
func (g *Gateway) serveDetached(c net.Conn, h *hub, v *viewer, lastID int64) {
	v.conn, v.g = c, g
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			v.raw = raw
		}
	}
	h.join(v, lastID)
	g.joinedWhileDraining(v)
	g.fetchFriends(h, v)
	g.m.viewers.Inc()
	go v.watch(h)
}

// watch reads the connection until it fails (the client left, or cutOff
// closed it), then takes the viewer out. A client sends nothing after its
// request; anything it does send is discarded.
func (v *viewer) watch(h *hub) {
	var b [64]byte
	for {
		if _, err := v.conn.Read(b[:]); err != nil {
			break
		}
	}
	v.cutOff()
	v.mu.Lock()
	v.isCut, v.buf = true, nil
	v.mu.Unlock()
	h.leave(v)
	v.g.release(h)
	v.g.m.viewers.Dec()
}

// kick starts the writer goroutine unless it runs or nothing is queued.
func (v *viewer) kick() {
	v.mu.Lock()
	start := !v.writing && !v.isCut && len(v.buf) > 0
	if start {
		v.writing = true
	}
	v.mu.Unlock()
	if start {
		go v.writeLoop()
	}
}

// writeLoop writes the queue to the connection, at most one write with
// events per QuietGap (the rest of a flush the socket did not take
// goes at once), and returns as soon as the queue is empty; a failed
// write cuts the viewer.
func (v *viewer) writeLoop() {
	g := v.g
	var (
		spare []byte
		hold  *time.Timer
	)
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	for {
		v.mu.Lock()
		rest := v.rest
		v.rest = false
		v.mu.Unlock()
		if wait := g.cfg.QuietGap - time.Since(v.lastFlush); wait > 0 && !rest {
			if hold == nil {
				hold = time.NewTimer(wait)
			} else {
				hold.Reset(wait)
			}
			select {
			case <-hold.C:
			case <-v.cut:
				return
			}
		}
		v.mu.Lock()
		if len(v.buf) == 0 || v.isCut {
			// Idle: hold no buffer while nothing is queued, and leave no
			// expired deadline behind for the flushes' direct writes.
			v.buf = nil
			v.writing = false
			v.conn.SetWriteDeadline(time.Time{})
			leaving := v.leaving
			v.mu.Unlock()
			if leaving {
				v.cutOff()
			}
			return
		}
		buf, oldest, queued, urgent := v.buf, v.oldest, v.queued, v.urgent
		v.buf, v.oldest, v.urgent = spare[:0], 0, false
		v.mu.Unlock()
		v.conn.SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
		if _, err := v.conn.Write(buf); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The socket took less than the batch in WriteTimeout:
				// a viewer too slow to keep up, like one over MaxPending.
				g.m.slowCut.Inc()
			}
			v.cutOff()
			return
		}
		now := time.Now()
		if urgent {
			v.lastFlush = now
		}
		g.m.flushAge.Observe(now.Sub(queued).Seconds())
		if oldest > 0 {
			g.m.postToFlush.Observe(float64(now.UnixNano()-oldest) / 1e9)
		}
		if cap(buf) <= 16<<10 {
			spare = buf
		} else {
			spare = nil
		}
		// Nothing more queued: stop now rather than after another hold,
		// so the stream's next flush writes to the connection directly
		// instead of queueing behind a writer that is only waiting.
		v.mu.Lock()
		if len(v.buf) == 0 {
			v.buf = nil
			v.writing = false
			v.conn.SetWriteDeadline(time.Time{})
			leaving := v.leaving
			v.mu.Unlock()
			if leaving {
				// Sent away (Drain): its farewell is written.
				v.cutOff()
			}
			return
		}
		v.mu.Unlock()
	}
}
