package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	concordapp "github.com/concord-chat/concord/runtime/app"
)

// server is a Concord platform on loopback with a cutting proxy in front.
type server struct {
	t        *testing.T
	platform *concordapp.Node
	direct   string // host:port of the platform itself
	proxy    *proxy
	// suffix ends every username the test registers: the clusters of a
	// test process share one keyspace, where a second run of a test
	// (-count) would find its users taken.
	suffix string
}

// startServer starts a server with a fresh data directory and a proxy:
// `concord dev` in the test process, or processes with
// CONCORD_CONFORMANCE_TOPOLOGY=cluster (startCluster).
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerWith(t, nil)
}

// base is the REST base URL of the test's own (non-library) clients. They
// talk to the server directly: cutting the proxy is for the bot libraries'
// sockets, and would otherwise also kill these clients' idle keep-alive
// connections under them.
func (s *server) base() string { return "http://" + s.direct + "/api/v10" }

// proxy forwards TCP connections to a target and can cut them all.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	cuts   int
}

func startProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() { l.Close(); p.cut() })
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every proxied connection abruptly, as a dropped network does.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
		n++
	}
	p.conns = map[net.Conn]struct{}{}
	p.cuts++
	return n
}

// rest is a minimal REST client for driving scenarios as a person would.
type rest struct {
	t     *testing.T
	base  string
	token string
}

func (r *rest) do(method, path string, body any, out any) int {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.t.Fatalf("marshal: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	var resp *http.Response
	var raw []byte
	// A 429 is waited out and retried, as every Discord client library
	// does (the per-channel limit slows scenarios that post quickly).
	for attempt := 0; ; attempt++ {
		if b, ok := rd.(*bytes.Reader); ok {
			_, _ = b.Seek(0, io.SeekStart)
		}
		req, err := http.NewRequest(method, r.base+path, rd)
		if err != nil {
			r.t.Fatalf("request: %v", err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if r.token != "" {
			req.Header.Set("Authorization", r.token)
		}
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			r.t.Fatalf("%s %s: %v", method, path, err)
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || attempt == 5 {
			break
		}
		wait, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64)
		if err != nil || wait > 10 {
			break
		}
		<-time.After(time.Duration(wait * float64(time.Second)))
	}
	if out != nil && resp.StatusCode < 300 && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			r.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		r.t.Fatalf("%s %s: status %d: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// register creates an account and returns a client authenticated as it.
func (s *server) register(name string) (*rest, string) {
	s.t.Helper()
	r := &rest{t: s.t, base: s.base()}
	var out struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	r.do("POST", "/auth/register", map[string]string{"username": name + s.suffix, "password": "correct horse " + name}, &out)
	if out.Token == "" || out.UserID == "" {
		s.t.Fatalf("register %s: empty token or id", name)
	}
	r.token = out.Token
	return r, out.UserID
}

// world is a guild with an owner and a second member (the bot account).
type world struct {
	owner    *rest
	bot      *rest
	botID    string
	botToken string
	guildID  string
	channel  string
}

// newWorld registers an owner and a bot account, creates a guild and lets
// the bot join through an invite.
func newWorld(s *server, tag string) world {
	s.t.Helper()
	owner, _ := s.register("owner-" + tag)
	bot, botID := s.register("bot-" + tag)
	var g struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds", map[string]string{"name": "Conformance " + tag}, &g)
	var ch struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "bots", "type": 0}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	bot.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	return world{owner: owner, bot: bot, botID: botID, botToken: bot.token, guildID: g.ID, channel: ch.ID}
}

// waitFor receives from ch until match returns true or the deadline passes.
func waitFor[T any](t *testing.T, ch <-chan T, what string, match func(T) bool) T {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case v := <-ch:
			if match(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, fmt.Errorf("%w", err))
	}
}
