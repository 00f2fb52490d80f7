package httpserve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pires/go-proxyproto"
)

// Listener returns l with cfg's connection caps: a connection beyond
// MaxConnsPerAddr open connections of its client's IP, or beyond MaxConns
// open connections in total, is answered 429 (Discord's JSON error) and
// closed at once, before any request is read, so that neither a WebSocket
// upgrade nor a handler ever runs for it. Accept never blocks on a cap: a
// flood from some addresses cannot keep others from being accepted while
// the total has room.
//
// With cfg.TrustedProxies, connections are read through go-proxyproto:
// one from a trusted proxy may open with a PROXY protocol v1 or v2
// header, whose source address is then the connection's RemoteAddr and
// the key of the per-address cap (without a header the proxy's address
// counts); a header from any other peer fails the connection's first
// read, so net/http closes it unanswered. The header is read off the
// accept loop (bounded by ReadHeaderTimeout), so a proxy that is slow to
// send one holds up no other connection.
//
// The connections it returns also rewrite the plain-text error responses
// net/http writes before any handler runs (a malformed request line or
// escape, oversized headers) into Discord's JSON error.
func Listener(l net.Listener, cfg Config) net.Listener {
	cfg = cfg.WithDefaults()
	ln := &listener{Listener: l, perAddr: cfg.MaxConnsPerAddr, total: cfg.MaxConns, open: make(map[string]int)}
	ln.trust = newTrust(cfg.TrustedProxies, cfg.Logger)
	if ln.trust == nil {
		return ln
	}
	// USE for trusted peers: a header is believed but optional (a proxy's
	// health checks, or a proxy that forwards X-Forwarded-For instead).
	// REJECT for everyone else: a header fails the first read
	// (ErrSuperfluousProxyHeader) and net/http closes the connection.
	policy, err := proxyproto.PolicyFromRanges(ln.trust.ranges, proxyproto.USE, proxyproto.REJECT)
	if err != nil {
		// The ranges come from netip.Prefix.String and always parse.
		panic(fmt.Sprintf("httpserve: proxyproto rejects trusted ranges %v: %v", ln.trust.ranges, err))
	}
	headerTimeout := positive(cfg.ReadHeaderTimeout)
	if headerTimeout == 0 {
		headerTimeout = -1 // go-proxyproto: no header timeout
	}
	ln.Listener = &proxyproto.Listener{Listener: l, ConnPolicy: policy, ReadHeaderTimeout: headerTimeout}
	ln.ready = make(chan net.Conn)
	ln.failed = make(chan struct{})
	ln.closed = make(chan struct{})
	return ln
}

type listener struct {
	net.Listener
	perAddr, total int

	mu    sync.Mutex
	open  map[string]int // open connections per client IP
	count int

	// With trusted proxies: a pump goroutine accepts, and connections
	// reach Accept through ready once their client is known.
	trust     *trust
	pumpOnce  sync.Once
	ready     chan net.Conn
	errs      chan error    // temporary accept errors, passed on
	failed    chan struct{} // closed when the pump stops; err says why
	err       error
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	if l.trust != nil {
		return l.acceptResolved()
	}
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
		return &conn{Conn: c, raw: c, l: l, ip: ip}, nil
	}
}

// acceptResolved is Accept with trusted proxies: the next connection the
// pump has admitted under its client's address.
func (l *listener) acceptResolved() (net.Conn, error) {
	l.pumpOnce.Do(func() {
		l.errs = make(chan error)
		go l.pump()
	})
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.failed:
		return nil, l.err
	}
}

// pump accepts connections until the listener fails. A connection from
// an untrusted peer is admitted under the peer's address at once (its
// PROXY header, if it sends one, is refused on first read); one from a
// trusted proxy counts against the total at once and against its
// client's address once its header has been read, in a goroutine of its
// own.
func (l *listener) pump() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				// net/http backs off and calls Accept again.
				select {
				case l.errs <- err:
					continue
				case <-l.closed:
				}
			}
			l.err = err
			close(l.failed)
			return
		}
		pc, ok := c.(*proxyproto.Conn)
		if !ok {
			// The policy never answers SKIP, the one case in which
			// go-proxyproto hands over the socket itself.
			_ = c.Close()
			continue
		}
		raw := pc.Raw()
		peer := remoteIP(raw)
		if !l.trust.has(hostAddr(peer)) {
			// Reading RemoteAddr of pc would wait for the header check;
			// an untrusted peer's address is its socket's.
			if c := l.admitConn(pc, raw, peer); c != nil {
				l.deliver(c)
			}
			continue
		}
		if !l.admitTotal() {
			metrics.rejected.WithLabelValues("total").Inc()
			reject(raw)
			continue
		}
		go func() {
			// RemoteAddr reads the header (or finds none) first.
			ip := addrIP(pc.RemoteAddr())
			if reason := l.admitAddr(ip); reason != "" {
				l.releaseTotal()
				metrics.rejected.WithLabelValues(reason).Inc()
				reject(raw)
				return
			}
			metrics.open.Inc()
			l.deliver(&conn{Conn: pc, raw: raw, l: l, ip: ip})
		}()
	}
}

// admitConn admits c under ip, or rejects it and returns nil.
func (l *listener) admitConn(c, raw net.Conn, ip string) *conn {
	if reason := l.admit(ip); reason != "" {
		metrics.rejected.WithLabelValues(reason).Inc()
		reject(raw)
		return nil
	}
	metrics.open.Inc()
	return &conn{Conn: c, raw: raw, l: l, ip: ip}
}

// deliver hands an admitted connection to Accept, or closes it if the
// listener closed first.
func (l *listener) deliver(c *conn) {
	select {
	case l.ready <- c:
	case <-l.closed:
		_ = c.Close()
	case <-l.failed:
		_ = c.Close()
	}
}

// Close closes the listener; connections still waiting for their header
// are closed as they come through.
func (l *listener) Close() error {
	if l.closed != nil {
		l.closeOnce.Do(func() { close(l.closed) })
	}
	return l.Listener.Close()
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

// admitTotal counts a new connection against the total only, for one
// whose client address is not known yet; admitAddr completes it.
func (l *listener) admitTotal() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total > 0 && l.count >= l.total {
		return false
	}
	l.count++
	return true
}

// admitAddr counts a connection admitTotal let in against its client's
// ip, or returns why it is refused.
func (l *listener) admitAddr(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perAddr > 0 && l.open[ip] >= l.perAddr {
		return "per_address"
	}
	l.open[ip]++
	return ""
}

func (l *listener) releaseTotal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count--
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
	return addrIP(c.RemoteAddr())
}

// addrIP is the IP of a, the whole address for a non-IP network.
func addrIP(a net.Addr) string {
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
	// raw is the socket under Conn (Conn itself, or the go-proxyproto
	// connection's).
	raw  net.Conn
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
	sc, ok := c.raw.(syscall.Conn)
	if !ok {
		return nil, errors.New("httpserve: connection has no file descriptor")
	}
	return sc.SyscallConn()
}

// SetWriteBuffer sets the socket's send buffer (TCP connections).
func (c *conn) SetWriteBuffer(bytes int) error {
	if tc, ok := c.raw.(interface{ SetWriteBuffer(int) error }); ok {
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
