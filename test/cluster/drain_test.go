//go:build integration

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// resumingClient is a gateway client that behaves like a bot library: it
// identifies once, heartbeats, and on op 7 closes with 4000 and resumes
// at READY's resume_gateway_url with its last sequence number. Each
// connection is a gwtest.Conn; every dispatch of all of them is recorded
// in arrival order. INVALID_SESSION is an error: the session must
// survive.
type resumingClient struct {
	name, url, token string

	mu         sync.Mutex
	frames     []dispatch
	sessionID  string
	resumeURL  string
	lastSeq    int64
	reconnects int // op 7s received
	resumed    int // RESUMED received
	err        error
	changed    chan struct{}
	stopping   bool
	conn       *gwtest.Conn
	done       chan struct{}
}

func startResumingClient(t *testing.T, name, url, token string) *resumingClient {
	c := &resumingClient{name: name, url: url, token: token, changed: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	t.Cleanup(func() {
		c.mu.Lock()
		c.stopping = true
		conn := c.conn
		c.mu.Unlock()
		if conn != nil {
			conn.Close()
		}
		<-c.done
	})
	return c
}

// notify wakes awaiters; c.mu must be held.
func (c *resumingClient) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *resumingClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.stopping {
		c.err = err
	}
	c.notify()
}

func (c *resumingClient) run() {
	defer close(c.done)
	url := c.url
	for {
		again, err := c.connect(url)
		if err != nil {
			c.fail(err)
			return
		}
		if !again {
			return
		}
		c.mu.Lock()
		url = c.resumeURL + "?v=10&encoding=json"
		c.mu.Unlock()
	}
}

// connect runs one connection: IDENTIFY or RESUME, then frames until op
// 7 (again is true) or the end.
func (c *resumingClient) connect(url string) (again bool, err error) {
	c.mu.Lock()
	sid, seq := c.sessionID, c.lastSeq
	c.mu.Unlock()
	reconnect, invalid := make(chan struct{}, 1), make(chan json.RawMessage, 1)
	o := gwtest.Options{Name: c.name, OnFrame: func(op int, f gwtest.Frame) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch op {
		case 0:
			c.frames = append(c.frames, f)
			c.lastSeq = f.Seq
			switch f.Type {
			case "READY":
				var r struct {
					SessionID        string `json:"session_id"`
					ResumeGatewayURL string `json:"resume_gateway_url"`
				}
				_ = json.Unmarshal(f.D, &r)
				c.sessionID, c.resumeURL = r.SessionID, r.ResumeGatewayURL
			case "RESUMED":
				c.resumed++
			}
		case 7:
			c.reconnects++
			select {
			case reconnect <- struct{}{}:
			default:
			}
		case 9:
			select {
			case invalid <- f.D:
			default:
			}
		}
		c.notify()
	}}
	if sid != "" {
		o.Resume = &gwtest.Resume{SessionID: sid, Seq: seq}
	}
	conn, err := gwtest.Dial(url, c.token, o)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.conn = conn
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		conn.Close()
		return false, nil
	}
	select {
	case <-reconnect:
		// As discord.py and discordgo do: close with a code other than
		// 1000/1001, which would end the session, and resume.
		conn.CloseWith(4000)
		return true, nil
	case d := <-invalid:
		conn.Close()
		return false, fmt.Errorf("%s: INVALID_SESSION (d=%s) after seq %d", c.name, d, seq)
	case <-conn.Done():
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if stopping {
			return false, nil
		}
		select {
		case <-reconnect: // the server closed right after op 7
			return true, nil
		default:
		}
		return false, fmt.Errorf("%s: connection ended (close code %d)", c.name, conn.CloseCode())
	}
}

// await waits until cond holds under the client's lock; the client
// failing or the timeout passing fails the test.
func (c *resumingClient) await(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		ok, err, ch := cond(), c.err, c.changed
		c.mu.Unlock()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: no %s within %v", c.name, what, timeout)
		}
	}
}

// drainReply is the admin endpoint's DrainState.
type drainReply struct {
	Draining bool  `json:"draining"`
	Sessions int64 `json:"sessions"`
	Done     bool  `json:"done"`
}

func adminDrain(t *testing.T, method, addr string, body any) drainReply {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, "http://"+addr+"/admin/drain", rd)
	req.Header.Set("Authorization", "Bearer "+adminTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s /admin/drain on %s: %v", method, addr, err)
	}
	defer resp.Body.Close()
	var st drainReply
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		t.Fatalf("%s /admin/drain on %s: status %d", method, addr, resp.StatusCode)
	}
	return st
}

// TestGatewayDrainHandsOffSession drains a gateway with a successor while
// writers post continuously: each client behind the load balancer gets
// op 7 (spread over the reconnect jitter, while its events already go to
// the successor), resumes on the successor (RESUMED, not INVALID_SESSION)
// and receives every acknowledged message exactly once with gap-free
// sequence numbers; the drained node is draining in the registry, not
// ready, and reports done with no session left.
func TestGatewayDrainHandsOffSession(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "drain")
	common := env.nodeArgs(
		"--data-dir="+t.TempDir(),
		"--log-level=info",
	)
	core := startNode(t, "core-1", freeAddr(t), append([]string{"--roles=guild,api", "--grpc=" + freeAddr(t), "--worker=1"}, common...)...)
	gwAdmin := []string{freeAddr(t), freeAddr(t)}
	gw1 := startNode(t, "gateway-1", freeAddr(t), append([]string{"--roles=gateway", "--grpc=" + freeAddr(t), "--worker=2", "--admin=" + gwAdmin[0]}, common...)...)
	gw2 := startNode(t, "gateway-2", freeAddr(t), append([]string{"--roles=gateway", "--grpc=" + freeAddr(t), "--worker=3", "--admin=" + gwAdmin[1]}, common...)...)
	deadline := time.Now().Add(45 * time.Second)
	for _, p := range []*proc{core, gw1, gw2} {
		p.waitReady(t, deadline)
	}
	reg := env.registry(t)
	gatewayRing := watchRing(t, ctx, reg, registry.RoleGateway)
	waitRing(t, gatewayRing, 2)
	lb := newReadyLB(t, gw1.http, gw2.http)
	t.Logf("cluster: 3 nodes and the load balancer ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: core.http, client: &http.Client{Timeout: 30 * time.Second}}
	var tokens []string
	for i := range 2 {
		tokens = append(tokens, register(t, api, fmt.Sprintf("d%d", i)))
	}
	guildID := createGuild(t, api, tokens[0], "drained")
	var chans []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	api.must(t, tokens[0], "GET", "/guilds/"+guildID+"/channels", nil, &chans)
	var channels []string
	for _, ch := range chans {
		if ch.Type == 0 {
			channels = append(channels, ch.ID)
		}
	}
	if len(channels) == 0 {
		t.Fatalf("no text channel in %+v", chans)
	}
	var inv struct {
		Code string `json:"code"`
	}
	api.must(t, tokens[0], "POST", "/channels/"+channels[0]+"/invites", map[string]any{}, &inv)
	api.must(t, tokens[1], "POST", "/invites/"+inv.Code, map[string]any{}, nil)

	// The clients identify through the balancer: both gateways are
	// ready, so they land on the first.
	const nClients = 4
	var clients []*resumingClient
	for i := range nClients {
		clients = append(clients, startResumingClient(t, fmt.Sprintf("client-%d", i), "ws://"+lb.addr()+"/gateway?v=10&encoding=json", tokens[i%2]))
	}
	for _, c := range clients {
		c.await(t, "READY and GUILD_CREATE", 20*time.Second, func() bool {
			return len(guildCreates(c.frames, guildID)) > 0
		})
	}
	picks := lb.picksSince(0)
	for _, p := range picks {
		if p != gw1.http {
			t.Fatalf("a client landed on %s, want gateway-1 (%s)", p, gw1.http)
		}
	}

	// Writers post continuously through the API while the drain runs.
	wr := &writerPool{api: api, channels: channels, tokens: tokens, progress: make(chan struct{}, 1024)}
	wr.start(ctx, "d")
	wr.await(t, 30, 20*time.Second)
	drainAt := time.Now()
	st := adminDrain(t, "POST", gwAdmin[0], map[string]any{
		"successor": "gateway-2", "successorAddress": gwAdmin[1],
		"reconnectJitter": int64(300 * time.Millisecond), "deadline": time.Now().Add(time.Minute),
	})
	if !st.Draining {
		t.Fatalf("POST /admin/drain: %+v", st)
	}
	// Idempotent: a second POST reports the same drain.
	if st2 := adminDrain(t, "POST", gwAdmin[0], map[string]any{"successor": "gateway-2", "successorAddress": gwAdmin[1]}); !st2.Draining {
		t.Fatalf("second POST /admin/drain: %+v", st2)
	}
	for _, c := range clients {
		c.await(t, "op 7 and RESUMED", 30*time.Second, func() bool { return c.reconnects > 0 && c.resumed > 0 })
	}
	t.Logf("drain: every client got op 7 and RESUMED within %v of POST /admin/drain (jitter 300ms)", time.Since(drainAt).Round(time.Millisecond))
	moved := lb.picksSince(len(picks))
	for _, p := range moved {
		if p != gw2.http {
			t.Fatalf("a client reconnected to %s, want gateway-2 (%s)", p, gw2.http)
		}
	}
	if len(moved) < nClients {
		t.Fatalf("%d reconnections after the drain, want %d", len(moved), nClients)
	}
	before := wr.acked()
	wr.await(t, before+30, 20*time.Second)
	wr.stop()

	// Every client gets every acknowledged message exactly once, seqs
	// gap-free.
	wr.mu.Lock()
	acks := append([]ack(nil), wr.acks...)
	wr.mu.Unlock()
	for _, c := range clients {
		c.await(t, "every acknowledged message", 20*time.Second, func() bool {
			got := map[string]bool{}
			for _, m := range messages(c.frames) {
				got[m.ID] = true
			}
			for _, a := range acks {
				if !got[a.id] {
					return false
				}
			}
			return true
		})
		c.mu.Lock()
		frames := append([]dispatch(nil), c.frames...)
		reconnects := c.reconnects
		c.mu.Unlock()
		if err := checkSeq(frames); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		seen := map[string]int{}
		for _, m := range messages(frames) {
			seen[m.ID]++
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%s: message %s arrived %d times", c.name, id, n)
			}
		}
		t.Logf("%s: %d dispatches, %d messages (%d acknowledged), %d op 7, gap-free", c.name, len(frames), len(seen), len(acks), reconnects)
	}

	// The drained node reports done with no session; the successor
	// imported the session.
	var last drainReply
	limit := time.Now().Add(20 * time.Second)
	for {
		last = adminDrain(t, "GET", gwAdmin[0], nil)
		if last.Done || time.Now().After(limit) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !last.Draining || !last.Done || last.Sessions != 0 {
		t.Fatalf("GET /admin/drain: %+v, want draining, done, 0 sessions", last)
	}
	// Every guild source's marker arrived before the export.
	for _, bad := range []string{"session move incomplete", "session move markers missing", "drain incomplete"} {
		if strings.Contains(gw1.output(), bad) {
			t.Fatalf("gateway-1 logged %q", bad)
		}
	}
	if n := metricSum(t, gwAdmin[1], "concord_gateway_handoff_sessions_total"); n != nClients {
		t.Fatalf("successor imported %v sessions, want %d", n, nClients)
	}
	if n, ok := gatewayRing.Node("gateway-1"); !ok || !n.Draining {
		t.Fatalf("registry: gateway-1 %+v (live %v), want draining", n, ok)
	}
	resp, err := http.Get("http://" + gw1.http + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("drained node /readyz: %d, want 503", resp.StatusCode)
	}
}
