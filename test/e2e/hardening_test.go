package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
)

// discordError is Discord's error body.
type discordError struct {
	Message string `json:"message"`
	Code    *int   `json:"code"`
}

// checkDiscordError fails unless resp is status with Content-Type
// application/json and a {"message", "code": 0} body.
func checkDiscordError(t *testing.T, what string, resp *http.Response, status int) {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q, want application/json; body %s", what, ct, body)
	}
	var e discordError
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" || e.Code == nil || *e.Code != 0 {
		t.Fatalf("%s: body %s is not Discord's error JSON with code 0 (%v)", what, body, err)
	}
}

// adminDrain posts /admin/drain with the Authorization header auth (none
// when empty).
func adminDrain(t *testing.T, addr, auth string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/admin/drain", strings.NewReader("{}"))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /admin/drain: %v", err)
	}
	return resp
}

func readyz(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// identify opens a gateway session with token and reports whether READY
// came, and the close code when the session ended instead.
func identify(t *testing.T, addr, token string) (ready bool, closeCode int) {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(addr), token, gwtest.Options{Name: "e2e", Intents: 1})
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	defer c.Close()
	err = c.Await("READY", 20*time.Second, func(fs []gwtest.Frame) bool { return len(fs) > 0 || c.InvalidSession() })
	fs := c.Frames()
	if err != nil || len(fs) == 0 {
		return false, c.CloseCode()
	}
	return fs[0].Type == "READY", 0
}

// TestAdminDrainNeedsCredentials is the admin-drain finding against the real
// `concord dev`: an unauthenticated POST /admin/drain answers 401 and
// changes nothing (/readyz stays 200, IDENTIFY still gets READY), with or
// without --admin-token; only the configured token drains.
func TestAdminDrainNeedsCredentials(t *testing.T) {
	t.Run("off without --admin-token", func(t *testing.T) {
		addr := freeAddr(t)
		p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+t.TempDir())
		for _, auth := range []string{"", "Bearer ", "Bearer guess", p.token} {
			checkDiscordError(t, "POST /admin/drain with Authorization "+auth, adminDrain(t, addr, auth), http.StatusUnauthorized)
		}
		if code := readyz(t, addr); code != http.StatusOK {
			t.Fatalf("/readyz after unauthenticated drains = %d, want 200", code)
		}
		if ready, code := identify(t, addr, p.token); !ready {
			t.Fatalf("IDENTIFY after unauthenticated drains: no READY (close code %d)", code)
		}
	})
	t.Run("with --admin-token", func(t *testing.T) {
		addr := freeAddr(t)
		const token = "e2e-admin-token-0123456789"
		p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+t.TempDir(), "--admin-token="+token)
		for _, auth := range []string{"", "Bearer wrong", token, "Basic " + token} {
			checkDiscordError(t, "POST /admin/drain with Authorization "+auth, adminDrain(t, addr, auth), http.StatusUnauthorized)
		}
		if code := readyz(t, addr); code != http.StatusOK {
			t.Fatalf("/readyz after refused drains = %d, want 200", code)
		}
		if ready, code := identify(t, addr, p.token); !ready {
			t.Fatalf("IDENTIFY after refused drains: no READY (close code %d)", code)
		}
		// Accepted: 200 with the drain state, as on a cluster's gateway
		// node (the drain runs in the background).
		resp := adminDrain(t, addr, "Bearer "+token)
		var st struct {
			Draining bool `json:"draining"`
		}
		err := json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || !st.Draining {
			t.Fatalf("POST /admin/drain with the admin token = %d, state draining=%v (%v), want 200 and draining", resp.StatusCode, st.Draining, err)
		}
		if code := readyz(t, addr); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz after the drain = %d, want 503", code)
		}
	})
}

// rawExchange writes req on a fresh TCP connection and reads one response.
func rawExchange(t *testing.T, addr, req string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("response to %q: %v", req[:min(len(req), 60)], err)
	}
	return resp
}

// TestNetHTTPErrorsAreDiscordJSON is finding 6: requests net/http answers
// on its own (an unclean path's redirect, a bad escape, oversized headers,
// a transfer encoding or length it refuses) get Discord's JSON error. Raw TCP,
// because Go's clients clean paths and refuse bad escapes.
func TestNetHTTPErrorsAreDiscordJSON(t *testing.T) {
	addr := freeAddr(t)
	p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+t.TempDir(), "--http-max-header-bytes=4096")
	cases := []struct {
		name, req string
		status    int
	}{
		{"literal ../", "GET /api/v10/users/../gateway HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"literal ./ and //", "GET /api/v10//users/./@me HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"encoded ..", "GET /api/v10/users/%2e%2e/gateway HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusNotFound},
		{"%ZZ", "GET /api/v10/users/%ZZ HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"malformed request line", "GET\r\nHost: x\r\n\r\n", http.StatusBadRequest},
		{"headers too large", "GET /api/v10/gateway HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"unsupported transfer encoding", "POST /api/v10/gateway HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", http.StatusNotImplemented},
		{"bad Content-Length", "POST /api/v10/gateway HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", http.StatusBadRequest},
	}
	for _, c := range cases {
		checkDiscordError(t, c.name, rawExchange(t, addr, c.req), c.status)
	}

	// Tokens verify only in their canonical encoding: the dev token with
	// its last character changed in the bits base64 leaves unused is 401.
	me := func(token string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v10/users/@me", nil)
		req.Header.Set("Authorization", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := me(p.token); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /users/@me with the dev token = %d", resp.StatusCode)
	}
	variants := 0
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sig := p.token[strings.LastIndexByte(p.token, '.')+1:]
	want, _ := base64.RawURLEncoding.DecodeString(sig)
	for _, c := range alphabet {
		v := p.token[:len(p.token)-1] + string(c)
		if got, err := base64.RawURLEncoding.DecodeString(v[strings.LastIndexByte(v, '.')+1:]); v == p.token || err != nil || string(got) != string(want) {
			continue
		}
		variants++
		resp := me(v)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /users/@me with a non-canonical spelling of the dev token = %d, want 401", resp.StatusCode)
		}
		resp.Body.Close()
	}
	if variants == 0 {
		t.Fatal("the dev token's signature has no non-canonical spelling")
	}
}

// closedWithin reports how long the server took to close c (reading and
// discarding whatever it sends), failing after limit.
func closedWithin(t *testing.T, what string, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: connection still open after %v", what, limit)
	}
	return took
}

// TestSlowSocketsClosed is finding 4: headers that never finish (sent a
// byte at a time, or not at all) and a body shorter than its
// Content-Length are closed within the configured timeouts.
func TestSlowSocketsClosed(t *testing.T) {
	addr := freeAddr(t)
	p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+t.TempDir(),
		"--http-read-header-timeout=1s", "--http-read-timeout=1s")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	silent := dial()
	if took := closedWithin(t, "no bytes at all", silent, 5*time.Second); took < 500*time.Millisecond {
		t.Fatalf("silent connection closed after %v, before the 1s header timeout", took)
	}

	// Headers trickled a byte every 100ms never finish: the timeout counts
	// from the first byte, not from the last.
	trickle := dial()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, b := range []byte("GET /api/v10/gateway HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200)) {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := trickle.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	closedWithin(t, "trickled headers", trickle, 5*time.Second)

	short := dial()
	body := `{"content":"`
	if _, err := io.WriteString(short, "POST /api/v10/channels/1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: "+p.token+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	if len(body) != 12 {
		t.Fatalf("body is %d bytes", len(body))
	}
	closedWithin(t, "Content-Length 1000 with 12 bytes sent", short, 5*time.Second)

	// The node still serves.
	if code := readyz(t, addr); code != http.StatusOK {
		t.Fatalf("/readyz = %d after the slow sockets", code)
	}
}

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnectionCapPerAddress: one address holds at most
// --http-max-conns-per-addr connections; the next is answered 429 and
// closed before any request, another address is served, and a closed
// connection frees its slot.
func TestConnectionCapPerAddress(t *testing.T) {
	addr := freeAddr(t)
	startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+t.TempDir(), "--http-max-conns-per-addr=4")
	var held []net.Conn
	for range 4 {
		c := dialFrom(t, "127.0.0.2", addr)
		held = append(held, c)
	}
	// The four are accepted and served (one request each keeps them open).
	for i, c := range held {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d under the cap: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	over := dialFrom(t, "127.0.0.2", addr)
	_ = over.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("fifth connection from one address: no 429 answer: %v", err)
	}
	checkDiscordError(t, "fifth connection from one address", resp, http.StatusTooManyRequests)
	closedWithin(t, "fifth connection", over, 5*time.Second)

	other := dialFrom(t, "127.0.0.3", addr)
	_ = other.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(other, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(other), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another address while the first is at its cap: %v %v", resp, err)
	}

	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dialFrom(t, "127.0.0.2", addr)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("slot of a closed connection never freed: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
