package httpserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies([]string{" 10.0.0.0/8", "", "192.0.2.7", "fd00::/8 ", "::ffff:198.51.100.1", "10.1.2.3/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "fd00::/8", "198.51.100.1/32", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: got %v, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.300", "example.com", "10.0.0.0/33", "10.0.0.1:80"} {
		if _, err := ParseTrustedProxies([]string{"10.0.0.1", bad}); err == nil {
			t.Errorf("%q parsed", bad)
		}
		if err := (Config{TrustedProxies: []string{bad}}).Validate(); err == nil {
			t.Errorf("Validate accepted %q", bad)
		}
	}
}

// The client behind a chain of proxies is the right-most X-Forwarded-For
// entry that is not a trusted proxy; what lies left of it is the client's
// own claim and is never believed.
func TestForwardedClientRightMostUntrusted(t *testing.T) {
	tr := newTrust([]string{"10.0.0.0/8", "192.0.2.1"}, nil)
	for _, tc := range []struct {
		xff  []string
		want string // "" = no client named
	}{
		{[]string{"203.0.113.9"}, "203.0.113.9"},
		// The client forged "1.1.1.1"; the trusted hop appended its peer.
		{[]string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		// Trusted hops right of the client are skipped, across headers.
		{[]string{"1.1.1.1, 203.0.113.9, 10.1.1.1", "192.0.2.1"}, "203.0.113.9"},
		{[]string{"203.0.113.9:4711, 10.1.1.1"}, "203.0.113.9"},
		{[]string{"[2001:db8::5]:80"}, "2001:db8::5"},
		// Every entry trusted: the left-most is where the request began.
		{[]string{"10.9.9.9, 10.1.1.1"}, "10.9.9.9"},
		// Garbage ends the walk at the last trusted hop.
		{[]string{"203.0.113.9, bogus, 10.1.1.1"}, "10.1.1.1"},
		{[]string{"bogus"}, ""},
		{[]string{""}, ""},
	} {
		got, ok := tr.forwardedClient(tc.xff)
		if tc.want == "" {
			if ok {
				t.Errorf("%q: got %v, want none", tc.xff, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tc.want) {
			t.Errorf("%q: got %v %v, want %s", tc.xff, got, ok, tc.want)
		}
	}
}

// Front believes X-Forwarded-For only from a trusted peer, and only with
// trusted proxies configured at all.
func TestFrontXForwardedFor(t *testing.T) {
	var seen string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr })
	for _, tc := range []struct {
		name    string
		trusted []string
		peer    string
		xff     string
		want    string
	}{
		{"trusted peer", []string{"10.0.0.0/8"}, "10.0.0.5:4000", "1.1.1.1, 203.0.113.9", "203.0.113.9:0"},
		{"untrusted peer", []string{"10.0.0.0/8"}, "198.51.100.4:4000", "203.0.113.9", "198.51.100.4:4000"},
		{"nobody trusted", nil, "10.0.0.5:4000", "203.0.113.9", "10.0.0.5:4000"},
		{"trusted peer, no header", []string{"10.0.0.0/8"}, "10.0.0.5:4000", "", "10.0.0.5:4000"},
		{"trusted peer, garbage", []string{"10.0.0.0/8"}, "10.0.0.5:4000", "nonsense", "10.0.0.5:4000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Front(h, Config{TrustedProxies: tc.trusted})
			r := httptest.NewRequest("GET", "/x", nil)
			r.RemoteAddr = tc.peer
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			seen = ""
			f.ServeHTTP(httptest.NewRecorder(), r)
			if seen != tc.want {
				t.Errorf("handler saw RemoteAddr %q, want %q", seen, tc.want)
			}
			if r.RemoteAddr != tc.peer {
				t.Errorf("the server's request was modified: %q", r.RemoteAddr)
			}
		})
	}
}

// echoAddr answers every request with its RemoteAddr.
var echoAddr = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.RemoteAddr) })

// dialProxied opens a connection to addr, sends header (nil: none) and a
// request, and returns the connection and the response body (err if the
// server answered nothing).
func dialProxied(t *testing.T, addr string, header *proxyproto.Header) (net.Conn, *http.Response, string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if header != nil {
		if _, err := header.WriteTo(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return c, nil, "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return c, nil, "", err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.ContentLength >= 0 && err == nil {
		return c, resp, string(b), nil
	}
	return c, resp, string(b), err
}

// proxyHeader is a PROXY header of version v for a TCP connection from
// client (ip:port) to 127.0.0.1:80.
func proxyHeader(v byte, client string) *proxyproto.Header {
	src := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(client))
	return proxyproto.HeaderProxyFromAddrs(v, src, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80})
}

// A trusted proxy's PROXY header, v1 or v2, makes its source the
// request's RemoteAddr; a trusted proxy may also connect without one.
func TestProxyHeaderFromTrustedPeer(t *testing.T) {
	addr := serve(t, echoAddr, Config{TrustedProxies: []string{"127.0.0.0/8"}})
	for _, v := range []byte{1, 2} {
		_, resp, body, err := dialProxied(t, addr, proxyHeader(v, "203.0.113.7:5555"))
		if err != nil || resp.StatusCode != 200 || body != "203.0.113.7:5555" {
			t.Errorf("PROXY v%d: %v %q %v, want the header's source", v, resp, body, err)
		}
	}
	_, resp, body, err := dialProxied(t, addr, nil)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(body, "127.0.0.1:") {
		t.Errorf("trusted peer without a header: %v %q %v, want its own address", resp, body, err)
	}
}

// A PROXY header from a peer that is not trusted closes the connection
// unanswered; the same peer without a header is served as itself.
func TestProxyHeaderFromUntrustedPeerRefused(t *testing.T) {
	addr := serve(t, echoAddr, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	for _, v := range []byte{1, 2} {
		_, resp, body, err := dialProxied(t, addr, proxyHeader(v, "203.0.113.7:5555"))
		if err == nil {
			t.Errorf("PROXY v%d from an untrusted peer answered %v %q", v, resp.Status, body)
		} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
			t.Errorf("PROXY v%d from an untrusted peer: %v, want the connection closed", v, err)
		}
	}
	_, resp, body, err := dialProxied(t, addr, nil)
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(body, "127.0.0.1:") {
		t.Errorf("untrusted peer without a header: %v %q %v", resp, body, err)
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && strings.Contains(oe.Err.Error(), "reset")
}

// Behind a trusted proxy the per-address cap counts each client address
// on its own: one client's connections stop at the cap, another's are
// not touched by it, and the proxy's own address holds neither.
func TestPerAddressCapKeysOnProxiedClient(t *testing.T) {
	addr := serve(t, echoAddr, Config{MaxConnsPerAddr: 2, TrustedProxies: []string{"127.0.0.1"}})
	for i := range 2 {
		// Each stays open (keep-alive) and counted.
		if _, resp, _, err := dialProxied(t, addr, proxyHeader(2, "203.0.113.7:100"+string(rune('0'+i)))); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d of client A: %v %v", i+1, resp, err)
		}
	}
	_, resp, _, err := dialProxied(t, addr, proxyHeader(2, "203.0.113.7:2000"))
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connection of client A over MaxConnsPerAddr=2: %v %v, want 429", resp, err)
	}
	for i := range 2 {
		_, resp, body, err := dialProxied(t, addr, proxyHeader(1, "198.51.100.8:300"+string(rune('0'+i))))
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(body, "198.51.100.8:") {
			t.Fatalf("connection %d of client B: %v %q %v", i+1, resp, body, err)
		}
	}
	// The proxy itself (no header) has its own count, untouched.
	if _, resp, _, err := dialProxied(t, addr, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the proxy's own connection: %v %v", resp, err)
	}
}

// A trusted proxy that sends its header slowly holds up no other
// connection: the header is read off the accept loop.
func TestSlowProxyHeaderDoesNotBlockAccept(t *testing.T) {
	addr := serve(t, echoAddr, Config{TrustedProxies: []string{"127.0.0.1"}, ReadHeaderTimeout: time.Minute})
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "PROXY TCP4 "); err != nil { // and nothing more
		t.Fatal(err)
	}
	_, resp, body, err := dialProxied(t, addr, proxyHeader(2, "203.0.113.7:5555"))
	if err != nil || resp.StatusCode != 200 || body != "203.0.113.7:5555" {
		t.Fatalf("a connection behind a stalled header: %v %q %v", resp, body, err)
	}
}
