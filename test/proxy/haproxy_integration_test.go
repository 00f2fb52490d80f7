//go:build integration

package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pires/go-proxyproto"

	"github.com/concord-chat/concord/internal/concordbin"
	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/logbuf"
)

// Loopback addresses of the test's clients. HAProxy reaches concord from
// 127.0.0.1, the one trusted proxy; no client uses that address.
const (
	lbAddr = "127.0.0.1"
	// sessionClients are 127.0.10.1 … 127.0.10.<clients>.
	sessionNet = "127.0.10."
	capClient  = "127.0.20.1" // fills its per-address cap
	capOther   = "127.0.20.2" // connects while capClient is at its cap
	abuser     = "127.0.30.1" // gets itself banned over REST
	bystander  = "127.0.30.2" // shares the balancer with the abuser
	direct     = "127.0.40.1" // reaches concord without HAProxy
)

const (
	clients           = 200
	sessionsPerClient = 10
	// perAddrCap is concord's --http-max-conns-per-addr (its default):
	// far below the clients × sessionsPerClient sessions that all reach
	// concord from HAProxy's one address.
	perAddrCap = 256
)

// TestClientAddressesThroughHAProxy puts HAProxy (send-proxy-v2) in front
// of one `concord dev --trusted-proxies=127.0.0.1` and checks that
// concord sees each client, not the balancer:
//   - 2,000 gateway sessions from 200 client addresses all reach READY,
//     although they all arrive from HAProxy's address and the
//     per-address cap is 256;
//   - the cap still holds per client: the 257th connection of one
//     client address is refused (429) while another address connects;
//   - a client that reaches concord directly is served as itself, and
//     its own PROXY header closes its connection;
//   - a client that gets banned over REST (10,000 invalid requests)
//     does not get the client beside it behind HAProxy banned, and the
//     ban's log line names the client's address; through a second
//     frontend that sends X-Forwarded-For and no PROXY header the same
//     client is still the one banned.
//
// File descriptors: about 2,500 client sockets here, twice that in
// HAProxy (maxconn 4000) and 2,500 in concord, within the usual 20,000
// per process.
func TestClientAddressesThroughHAProxy(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("haproxy is not on PATH (%v): this test needs Debian's haproxy package (apt-get install haproxy; hack/test-deps.sh installs it)", err)
	}
	bin := concordbin.Path(t)
	concordAddr, front, frontXFF := freeAddr(t), freeAddr(t), freeAddr(t)
	c := startConcord(t, bin, concordAddr, "dev", "--http="+concordAddr, "--data-dir="+t.TempDir(),
		"--trusted-proxies="+lbAddr, "--http-max-conns-per-addr="+strconv.Itoa(perAddrCap))
	startHAProxy(t, haproxy, front, frontXFF, concordAddr)
	url := "ws://" + front + "/gateway?v=10&encoding=json"

	t.Run("sessions from many addresses", func(t *testing.T) {
		sessions := runSessions(t, url, c.token, clients*sessionsPerClient, func(i int) string {
			return sessionNet + strconv.Itoa(1+i%clients)
		})
		if n := sessions.ready.Load(); n != clients*sessionsPerClient {
			t.Fatalf("%d of %d sessions through HAProxy reached READY; first failure: %v",
				n, clients*sessionsPerClient, sessions.firstErr())
		}
	})

	t.Run("cap per client address", func(t *testing.T) {
		full := runSessions(t, url, c.token, perAddrCap, func(int) string { return capClient })
		if n := full.ready.Load(); n != perAddrCap {
			t.Fatalf("%d of %d sessions of %s reached READY; first failure: %v", n, perAddrCap, capClient, full.firstErr())
		}
		status, err := dialStatus(url, capClient)
		if status != http.StatusTooManyRequests {
			t.Fatalf("connection %d of %s through HAProxy: status %d (%v), want 429", perAddrCap+1, capClient, status, err)
		}
		other := runSessions(t, url, c.token, 1, func(int) string { return capOther })
		if other.ready.Load() != 1 {
			t.Fatalf("a session of %s while %s is at its cap: %v", capOther, capClient, other.firstErr())
		}
	})

	t.Run("direct client", func(t *testing.T) {
		// Not a trusted proxy: served as itself, WebSocket included...
		s := runSessions(t, "ws://"+concordAddr+"/gateway?v=10&encoding=json", c.token, 1, func(int) string { return direct })
		if s.ready.Load() != 1 {
			t.Fatalf("a direct session from %s: %v", direct, s.firstErr())
		}
		// ...but a PROXY header of its own closes its connection
		// unanswered: it cannot name its address.
		conn, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(direct)}}).Dial("tcp", concordAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 4000}, conn.RemoteAddr())
		if _, err := h.WriteTo(conn); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(conn, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			t.Fatalf("a PROXY header from %s, not a trusted proxy, was answered: %s", direct, resp.Status)
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a PROXY header from %s: connection left open", direct)
		}
	})

	t.Run("ban of one client", func(t *testing.T) {
		api := "http://" + front + "/api/v10/users/@me"
		abuserHTTP, bystanderHTTP := httpFrom(abuser), httpFrom(bystander)
		// Both clients are served before the abuse.
		for _, cl := range []struct {
			name string
			c    *http.Client
		}{{abuser, abuserHTTP}, {bystander, bystanderHTTP}} {
			if status, _ := get(t, cl.c, api, c.token); status != http.StatusOK {
				t.Fatalf("GET /users/@me from %s before the abuse: %d", cl.name, status)
			}
		}
		// Invalid requests (a bad token: 401, then 429s) from the abuser
		// until its address is banned: its valid token is refused too,
		// for the ban's hour.
		banned := abuse(t, abuserHTTP, api, c.token)
		if !banned {
			t.Fatalf("%s was not banned after its invalid requests through HAProxy", abuser)
		}
		if status, retry := get(t, bystanderHTTP, api, c.token); status != http.StatusOK {
			t.Fatalf("GET /users/@me from %s after %s was banned: %d (Retry-After %s), want 200: the ban hit the balancer's address",
				bystander, abuser, status, retry)
		}
		// Through the frontend that sends no PROXY header, concord takes
		// the client from HAProxy's X-Forwarded-For: the abuser is still
		// banned there, its neighbour still served.
		apiXFF := "http://" + frontXFF + "/api/v10/users/@me"
		if status, retry := get(t, abuserHTTP, apiXFF, c.token); status != http.StatusTooManyRequests {
			t.Errorf("GET /users/@me from %s through X-Forwarded-For after its ban: %d (Retry-After %s), want 429", abuser, status, retry)
		}
		if status, retry := get(t, bystanderHTTP, apiXFF, c.token); status != http.StatusOK {
			t.Errorf("GET /users/@me from %s through X-Forwarded-For: %d (Retry-After %s), want 200", bystander, status, retry)
		}
		named := false
		for _, line := range strings.Split(c.logs.String(), "\n") {
			if !strings.Contains(line, "client banned") {
				continue
			}
			if !strings.Contains(line, " addr="+abuser+" ") {
				t.Errorf("a ban's log line does not name %s: %s", abuser, line)
			}
			named = named || strings.Contains(line, "kind=address")
		}
		if !named {
			t.Errorf("concord logged no address ban of %s:\n%s", abuser, tail(c.logs.String(), 40))
		}
	})
}

// abuse sends invalid requests from c until the client's valid token is
// refused by a ban (a 429 whose Retry-After is beyond any rate limit's
// window), and reports whether it was. The bound is a generous multiple
// of the 10,000 invalid requests a ban takes.
func abuse(t *testing.T, c *http.Client, url, goodToken string) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && sent.Add(1) <= 40_000 {
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				req.Header.Set("Authorization", "Bot not-a-token")
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	defer wg.Wait()
	for {
		status, retry := get(t, c, url, goodToken)
		if status == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(retry); err == nil && s > 60 {
				return true
			}
		}
		if sent.Load() >= 40_000 {
			return false
		}
		time.Sleep(100 * time.Millisecond) // polling the ban while the abuse runs
	}
}

// get sends GET url with token from c and returns the status and the
// Retry-After header.
func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// httpFrom is an HTTP client whose connections come from the loopback
// address src.
func httpFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
}

// sessionRun is the outcome of runSessions.
type sessionRun struct {
	ready atomic.Int64
	mu    sync.Mutex
	errs  []error
}

func (r *sessionRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *sessionRun) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w (and %d more)", r.errs[0], len(r.errs)-1)
}

// runSessions opens n gateway sessions at url, session i from the
// loopback address src(i), and waits until each has reached READY or
// failed. The sessions that reached READY stay open, heartbeating, until
// the test ends, so they keep counting against the caps.
func runSessions(t *testing.T, url, token string, n int, src func(int) string) *sessionRun {
	t.Helper()
	run := &sessionRun{}
	ctx, cancel := context.WithCancel(context.Background())
	var live sync.WaitGroup
	t.Cleanup(func() { cancel(); live.Wait() })
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // dials in flight
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			ws, interval, err := gwtest.IdentifyFrom(ctx, url, net.ParseIP(src(i)), token, 1, time.Minute)
			<-sem
			if err != nil {
				run.fail(fmt.Errorf("session %d from %s: %w", i, src(i), err))
				return
			}
			run.ready.Add(1)
			live.Add(1)
			go func() {
				defer live.Done()
				gwtest.KeepAlive(ctx, ws, interval)
			}()
		}()
	}
	wg.Wait()
	return run
}

// dialStatus makes one WebSocket handshake at url from src and returns
// the HTTP status it got (101 when it succeeded, 0 with no answer).
func dialStatus(url, src string) (int, error) {
	d := websocket.Dialer{
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext,
		HandshakeTimeout: time.Minute,
	}
	ws, resp, err := d.Dial(url, nil)
	if ws != nil {
		ws.Close()
	}
	if resp == nil {
		return 0, err
	}
	return resp.StatusCode, err
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// concord is a running `concord` process.
type concord struct {
	token string
	logs  *logbuf.Buffer
}

// startConcord runs `concord <args>` until the test ends and waits for
// its /readyz and its dev token.
func startConcord(t *testing.T, bin, addr string, args ...string) *concord {
	t.Helper()
	cmd := exec.Command(bin, args...)
	logs := &logbuf.Buffer{}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start concord: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	tokens := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Dev token:"); ok {
				tokens <- strings.TrimSpace(v)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	waitReady(t, "concord", "http://"+addr+"/readyz", logs)
	select {
	case tok := <-tokens:
		return &concord{token: tok, logs: logs}
	case <-time.After(time.Minute):
		t.Fatalf("concord printed no dev token; logs:\n%s", tail(logs.String(), 40))
		return nil
	}
}

// startHAProxy runs HAProxy forwarding HTTP and WebSocket to backend:
// from front with a PROXY protocol v2 header on each connection, from
// frontXFF with X-Forwarded-For only.
func startHAProxy(t *testing.T, bin, front, frontXFF, backend string) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global
	# Each proxied connection takes two descriptors; 4000 stays well
	# within the 20,000 a process may open.
	maxconn 4000

defaults
	mode http
	timeout connect 5s
	timeout client 60s
	timeout server 60s
	timeout tunnel 1h
	option forwardfor

frontend public
	bind %s
	default_backend concord

frontend public-xff
	bind %s
	default_backend concord-xff

# As hack/run-cluster.sh checks its nodes: the health checks come from
# the trusted address too, with or without a PROXY header.
backend concord
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 1s fall 2 rise 2
	server concord-1 %s check send-proxy-v2

backend concord-xff
	server concord-1 %s
`, front, frontXFF, backend, backend)
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy rejects its configuration: %v\n%s\n%s", err, out, cfg)
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	logs := &logbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() })
	waitReady(t, "haproxy", "http://"+front+"/readyz", logs)
}

// waitReady polls url until it answers 200; the bound is for a loaded
// machine, not an expectation.
func waitReady(t *testing.T, what, url string, logs *logbuf.Buffer) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not answer 200 (%v); logs:\n%s", what, url, err, tail(logs.String(), 40))
		}
		time.Sleep(50 * time.Millisecond) // polling a process that gives no other signal
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
