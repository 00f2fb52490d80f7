package gateway

import (
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// viewer is one SSE connection. Frames are queued by the hub (under the
// hub's lock) and written by the connection's own goroutine.
type viewer struct {
	user snowflake.ID

	// Set by join under the hub's lock; read by the hub under it.
	lastSent  int64  // highest seq queued; nothing at or below goes again
	resumeTo  int64  // the client had every comment up to this seq (-1: none)
	coverFrom int64  // every visible comment from this seq on was sent
	joinGen   uint64 // the hub's frame generation when v joined
	// friends are the authors whose rest-tier comments v is shown (the
	// hub's fans index holds v's user under each), set once fetched.
	friends []snowflake.ID
	// flushed lists the frames of the current flush given to v one by
	// one (framesFor), for the impression counts.
	flushed []int

	mu      sync.Mutex
	buf     []byte
	oldest  int64     // AcceptedAt (Unix ns) of the oldest queued event, 0: none
	queued  time.Time // when buf went from empty to non-empty
	urgent  bool      // buf holds an event, not only bookkeeping (flush.go)
	isCut   bool
	leaving bool // sent away by Drain: its farewell is the last frame queued
	wake    chan struct{}
	cut     chan struct{}
	cutOnce sync.Once

	// Detached viewers only (HTTP/1.1 connections taken off net/http):
	// conn is written by a writer goroutine that runs only while frames
	// are queued (writing, under mu). Pings come from the hub's flush.
	conn      net.Conn
	raw       syscall.RawConn // conn's descriptor, for non-blocking writes (nil: none)
	g         *Gateway
	writing   bool
	lastFlush time.Time // the last write that carried an event
	rest      bool      // buf starts with the rest of a flush the socket did not take
}

func newViewer(user snowflake.ID) *viewer {
	return &viewer{user: user, lastSent: -1, resumeTo: -1, wake: make(chan struct{}, 1), cut: make(chan struct{})}
}

// wasSent reports whether the comment at seq (by author, shadow or not)
// was sent to v: before it left (resumeTo) or on this connection.
func (v *viewer) wasSent(seq int64, author snowflake.ID, shadow bool) bool {
	if shadow && (v.user == 0 || author != v.user) {
		return false
	}
	return seq <= v.resumeTo || seq >= v.coverFrom
}

// queue appends an opening frame (no limit check: the opening is bounded
// by the ring). The opening is not one of the stream's flushes: the next
// flush is not held back by it.
func (v *viewer) queue(frame []byte, seq int64) {
	v.mu.Lock()
	if len(v.buf) == 0 {
		v.queued = time.Now()
	}
	v.buf = append(v.buf, frame...)
	v.mu.Unlock()
	if seq > v.lastSent {
		v.lastSent = seq
	}
	v.signal()
}

// deliver hands v its part of a hub flush (b is shared with other
// viewers: never kept). A detached viewer with nothing queued is written
// at once without blocking; the rest, or everything for an HTTP/2 viewer
// or one with a backlog, is queued behind what is already there. A
// viewer whose queue would pass MaxPending is cut. urgent says the flush
// carries an event (not only bookkeeping): only those space a viewer's
// writes QuietGap apart.
func (v *viewer) deliver(b []byte, oldest int64, queued time.Time, urgent bool, g *Gateway, sw *sockWriter) {
	v.mu.Lock()
	if v.isCut || v.leaving {
		v.mu.Unlock()
		return
	}
	if v.raw != nil && !v.writing && len(v.buf) == 0 {
		n, err := sw.write(v.raw, b)
		if err != nil {
			v.mu.Unlock()
			v.cutOff()
			return
		}
		if n == len(b) {
			now := time.Now()
			if urgent {
				v.lastFlush = now
			}
			v.mu.Unlock()
			g.m.flushAge.Observe(now.Sub(queued).Seconds())
			if oldest > 0 {
				g.m.postToFlush.Observe(float64(now.UnixNano()-oldest) / 1e9)
			}
			return
		}
		// The socket is full: the writer goroutine writes the rest as soon
		// as the socket takes it (it is this flush, not another one), and
		// what comes after waits FlushInterval from now.
		if urgent {
			v.lastFlush = time.Now()
		}
		v.rest = true
		b = b[n:]
		oldest = 0
	}
	if len(v.buf)+len(b) > g.cfg.MaxPending {
		v.isCut = true
		v.buf = nil
		v.mu.Unlock()
		g.m.slowCut.Inc()
		v.cutOff()
		return
	}
	if len(v.buf) == 0 {
		v.queued = queued
	}
	if oldest > 0 && (v.oldest == 0 || oldest < v.oldest) {
		v.oldest = oldest
	}
	v.buf = append(v.buf, b...)
	v.urgent = v.urgent || urgent
	v.mu.Unlock()
	v.signal()
}

// sockWriter writes to detached viewers' sockets without waiting. One
// belongs to each flush worker and is reused for every viewer it writes,
// so a write allocates nothing (a closure built per call would escape to
// the heap through syscall.RawConn, three objects per viewer per flush).
type sockWriter struct {
	b   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

func newSockWriter() *sockWriter {
	w := &sockWriter{}
	w.fn = w.writeFD
	return w
}

// write writes as much of b to raw as the socket takes now; the viewer's
// mu is held, so no other write to the connection runs.
func (w *sockWriter) write(raw syscall.RawConn, b []byte) (int, error) {
	w.b, w.n, w.err = b, 0, nil
	err := raw.Write(w.fn)
	n := w.n
	if err == nil {
		err = w.err
	}
	w.b, w.err = nil, nil
	return n, err
}

func (w *sockWriter) writeFD(fd uintptr) bool {
	for w.n < len(w.b) {
		m, err := syscall.Write(int(fd), w.b[w.n:])
		if m > 0 {
			w.n += m
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if err != syscall.EAGAIN {
				w.err = err
			}
			break
		}
		if m <= 0 {
			break
		}
	}
	return true // never wait for the socket here
}

func (v *viewer) signal() {
	if v.conn != nil {
		v.kick()
		return
	}
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

func (v *viewer) cutOff() {
	v.cutOnce.Do(func() {
		close(v.cut)
		if v.conn != nil {
			v.conn.Close()
		}
	})
}

// take returns the queued bytes (urgent: they hold an event) and resets
// the queue.
func (v *viewer) take(spare []byte) (buf []byte, oldest int64, queued time.Time, urgent bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	buf, oldest, queued, urgent = v.buf, v.oldest, v.queued, v.urgent
	v.buf, v.oldest, v.urgent = spare[:0], 0, false
	return buf, oldest, queued, urgent
}

// serve writes v's frames to w until the client leaves, the viewer is cut
// or the gateway stops.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, v *viewer) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	g.m.viewers.Inc()
	defer g.m.viewers.Dec()
	var (
		lastFlush time.Time
		spare     []byte
		hold      *time.Timer
	)
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(g.cfg.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		return true
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-v.cut:
			return
		case <-v.wake:
			// The hub spaces a stream's event flushes (QuietGap apart at
			// the closest); a viewer's own writer keeps at least that
			// between its writes with events, so a backlog goes in few
			// writes without holding back a quiet stream's next event.
			if wait := g.cfg.QuietGap - time.Since(lastFlush); wait > 0 {
				if hold == nil {
					hold = time.NewTimer(wait)
				} else {
					hold.Reset(wait)
				}
				select {
				case <-hold.C:
				case <-r.Context().Done():
					return
				case <-v.cut:
					return
				}
			}
			buf, oldest, queued, urgent := v.take(spare)
			if len(buf) == 0 {
				// take handed spare to the queue: this one is the spare now
				// (keeping the old one would let the queue and the next
				// write share an array).
				spare = buf
				if v.sentAway() {
					return
				}
				continue
			}
			if !write(buf) {
				return
			}
			if v.sentAway() {
				// Its farewell is written (Drain): the response ends.
				return
			}
			now := time.Now()
			if urgent {
				lastFlush = now
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
		}
	}
}
