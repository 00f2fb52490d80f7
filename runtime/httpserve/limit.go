package httpserve

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Listener returns l with cfg's connection caps: a connection beyond
// MaxConnsPerAddr open connections of its remote IP, or beyond MaxConns
// open connections in total, is answered 429 (Discord's JSON error) and
// closed at once, before any request is read, so that neither a WebSocket
// upgrade nor a handler ever runs for it. Accept never blocks on a cap: a
// flood from some addresses cannot keep others from being accepted while
// the total has room.
//
// The connections it returns also rewrite the plain-text error responses
// net/http writes before any handler runs (a malformed request line or
// escape, oversized headers) into Discord's JSON error.
func Listener(l net.Listener, cfg Config) net.Listener {
	cfg = cfg.WithDefaults()
	return &listener{Listener: l, perAddr: cfg.MaxConnsPerAddr, total: cfg.MaxConns, open: make(map[string]int)}
}

type listener struct {
	net.Listener
	perAddr, total int

	mu    sync.Mutex
	open  map[string]int // open connections per remote IP
	count int
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if reason := l.admit(ip); reason != "" {
			metrics.rejected.WithLabelValues(reason).Inc()
			reject(c)
			continue
		}
		metrics.open.Inc()
		return &conn{Conn: c, l: l, ip: ip}, nil
	}
}

// admit counts a new connection from ip, or returns why it is refused.
func (l *listener) admit(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total > 0 && l.count >= l.total {
		return "total"
	}
	if l.perAddr > 0 && l.open[ip] >= l.perAddr {
		return "per_address"
	}
	l.count++
	l.open[ip]++
	return ""
}

func (l *listener) release(ip string) {
	metrics.open.Dec()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count--
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// remoteIP is the connection's remote IP, the key of the per-address cap
// (the whole address for a non-IP network).
func remoteIP(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// tooMany is the answer to a refused connection.
var tooMany = rawResponse(http.StatusTooManyRequests)

// reject answers a refused connection 429 without waiting for its request
// and closes it. The write gets a short deadline: a client that does not
// read must not hold the accept loop.
func reject(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(tooMany)
	_ = c.Close()
}

// rawResponse is a complete HTTP/1.1 response carrying Discord's JSON
// error for status, closing the connection.
func rawResponse(status int) []byte {
	body := `{"message":"` + statusMessage(status) + `","code":0}`
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nConnection: close\r\n\r\n" + body)
}

// conn is an accepted connection counted against the caps until Close.
type conn struct {
	net.Conn
	l    *listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// netErrorHeaders is what net/http puts between the status line and the
// body of the errors it writes itself, before any handler runs (a request
// it cannot parse). Responses of handlers always carry a Date header and
// sort Connection before Content-Type, so they never match.
const netErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// Write passes b on, except a plain-text error net/http writes on its own
// (one Write of a whole response): that becomes Discord's JSON error of
// the same status.
func (c *conn) Write(b []byte) (int, error) {
	if status, ok := netError(b); ok {
		if _, err := c.Conn.Write(rawResponse(status)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// netError reports whether b is a response net/http wrote itself, and
// its status.
func netError(b []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(b, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 4 || rest[3] != ' ' {
		return 0, false
	}
	line, _, ok := bytes.Cut(rest, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(rest[len(line):], []byte(netErrorHeaders)) {
		return 0, false
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 || status > 599 {
		return 0, false
	}
	return status, true
}

// SyscallConn exposes the socket for writers that bypass Write (the
// gateway's non-blocking frame writes).
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("httpserve: connection has no file descriptor")
	}
	return sc.SyscallConn()
}

// SetWriteBuffer sets the socket's send buffer (TCP connections).
func (c *conn) SetWriteBuffer(bytes int) error {
	if tc, ok := c.Conn.(interface{ SetWriteBuffer(int) error }); ok {
		return tc.SetWriteBuffer(bytes)
	}
	return errors.New("httpserve: connection has no send buffer")
}

// ReadFrom keeps the socket's zero-copy path (sendfile, splice) for
// io.Copy into the connection.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// NetConn returns the underlying connection.
func (c *conn) NetConn() net.Conn { return c.Conn }
