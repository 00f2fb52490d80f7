package bots_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// botEndpoint is a bot's interactions endpoint: it verifies signatures
// with the application's key as a bot must, answers PINGs, and answers
// interactions with reply (nil: 202).
type botEndpoint struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	key    ed25519.PublicKey
	now    func() time.Time
	reply  func(attempt int) (int, string)
	seen   []map[string]any
	forged int
	hit    chan struct{}
}

func (b *botEndpoint) setReply(f func(int) (int, string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reply = f
}

// snapshot returns what the endpoint saw, under its lock.
func (b *botEndpoint) snapshot() (seen []map[string]any, forged int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.seen...), b.forged
}

func newBotEndpoint(t *testing.T, now func() time.Time) *botEndpoint {
	b := &botEndpoint{t: t, now: now, hit: make(chan struct{}, 16)}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *botEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	key := b.key
	b.mu.Unlock()
	body, err := bots.Verifier{Key: key, Now: b.now}.Verify(r)
	if err != nil {
		b.mu.Lock()
		b.forged++
		b.mu.Unlock()
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return
	}
	var ix map[string]any
	if err := json.Unmarshal(body, &ix); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if ix["type"].(float64) == bots.InteractionPing {
		fmt.Fprint(w, `{"type":1}`)
		return
	}
	b.mu.Lock()
	b.seen = append(b.seen, ix)
	attempt := len(b.seen)
	reply := b.reply
	b.mu.Unlock()
	defer func() { b.hit <- struct{}{} }()
	if reply == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	status, out := reply(attempt)
	w.WriteHeader(status)
	fmt.Fprint(w, out)
}

// endpointEnv is an env whose egress is a plain client allowed onto
// loopback; production uses the egress client, which denies it.
func endpointEnv(t *testing.T) (*env, *botEndpoint, app) {
	e := newEnv(t, func(c *bots.Config, d *bots.Deps) {
		c.AllowPrivateEndpoints = true
		d.Egress = &http.Client{Timeout: 5 * time.Second}
	})
	b := newBotEndpoint(t, e.clock.Now)
	a := e.createApp("Hooked")
	key, _ := hex.DecodeString(a.VerifyKey)
	b.key = key
	e.install(a, permissions.SendMessages)
	return e, b, a
}

func (e *env) setEndpoint(a app, url string) response {
	return e.do("PATCH", fmt.Sprintf("/api/v10/applications/%d", a.ID), e.owner, map[string]any{"interactions_endpoint_url": url})
}

func TestHTTPEndpointInlineResponse(t *testing.T) {
	e, b, a := endpointEnv(t)
	b.setReply(func(int) (int, string) { return 200, `{"type":4,"data":{"content":"pong over http"}}` })
	m := e.expect(e.setEndpoint(a, b.srv.URL+"/interactions"), 200, 0)
	if m["interactions_endpoint_url"] != b.srv.URL+"/interactions" {
		t.Fatalf("endpoint not set: %v", m)
	}
	if _, forged := b.snapshot(); forged != 1 {
		t.Fatalf("verification sent %d forged PINGs, want 1", forged)
	}
	cmd := e.command(a, "ping")
	before := len(e.dispatch.deliveries())
	e.expect(e.do("POST", "/api/v10/interactions", e.member, map[string]any{
		"type": 2, "application_id": a.ID.String(), "channel_id": channelID.String(), "data": map[string]any{"id": cmd.String()},
	}), 204, 0)
	<-b.hit
	e.h.Close() // waits for the delivery to apply the inline answer
	if len(e.dispatch.deliveries()) != before {
		t.Fatal("an HTTP application also got INTERACTION_CREATE")
	}
	created := e.messages.created()
	if len(created) != 1 || created[0].Content != "pong over http" || created[0].AuthorID != a.BotID {
		t.Fatalf("messages = %+v", created)
	}
	seen, _ := b.snapshot()
	if seen[0]["token"] == nil || seen[0]["data"].(map[string]any)["name"] != "ping" {
		t.Fatalf("delivered interaction = %v", seen[0])
	}
}

func TestHTTPEndpointRetriesOnce(t *testing.T) {
	e, b, a := endpointEnv(t)
	e.expect(e.setEndpoint(a, b.srv.URL), 200, 0)
	b.setReply(func(attempt int) (int, string) {
		if attempt == 1 {
			return 503, `{}`
		}
		return 200, `{"type":4,"data":{"content":"second try"}}`
	})
	cmd := e.command(a, "flaky")
	e.expect(e.do("POST", "/api/v10/interactions", e.member, map[string]any{
		"type": 2, "application_id": a.ID.String(), "channel_id": channelID.String(), "data": map[string]any{"id": cmd.String()},
	}), 204, 0)
	<-b.hit
	<-b.hit
	e.h.Close()
	if seen, _ := b.snapshot(); len(seen) != 2 || seen[0]["id"] != seen[1]["id"] {
		t.Fatalf("deliveries = %d", len(seen))
	}
	if c := e.messages.created(); len(c) != 1 || c[0].Content != "second try" {
		t.Fatalf("messages = %+v", c)
	}
	if e.counter("concord_bots_interaction_deliveries_total", map[string]string{"path": "http", "result": "retried"}) != 1 {
		t.Fatal("retry not counted")
	}
}

// TestHTTPEndpointSilentTimesOut: a 202 with no callback, and an answer
// too large to read, both end in the visible failure at 3 s.
func TestHTTPEndpointSilentTimesOut(t *testing.T) {
	for name, reply := range map[string]func(int) (int, string){
		"accepted": nil,
		"huge": func(int) (int, string) {
			return 200, `{"type":4,"data":{"content":"` + strings.Repeat("x", 100<<10) + `"}}`
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, b, a := endpointEnv(t)
			e.expect(e.setEndpoint(a, b.srv.URL), 200, 0)
			b.setReply(reply)
			cmd := e.command(a, "quiet")
			e.expect(e.do("POST", "/api/v10/interactions", e.member, map[string]any{
				"type": 2, "application_id": a.ID.String(), "channel_id": channelID.String(), "data": map[string]any{"id": cmd.String()},
			}), 204, 0)
			<-b.hit
			e.clock.Advance(3 * time.Second)
			e.h.Close()
			c := e.messages.created()
			if len(c) != 1 || c[0].Content != bots.FailureMessage || c[0].EphemeralTo != e.memberID {
				t.Fatalf("messages = %+v", c)
			}
			if e.counter("concord_bots_interaction_misses_total", map[string]string{"application_id": a.ID.String()}) != 1 {
				t.Fatal("miss not counted")
			}
		})
	}
}

func TestEndpointVerificationRefusals(t *testing.T) {
	e, _, a := endpointEnv(t)
	// An endpoint that does not check signatures answers the forged PING.
	lax := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":1}`)
	}))
	defer lax.Close()
	target := newBotEndpoint(t, e.clock.Now)
	key, _ := hex.DecodeString(a.VerifyKey)
	target.key = key
	redirect := httptest.NewServer(http.RedirectHandler(target.srv.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"type":1,"pad":"`+strings.Repeat("x", 1<<20)+`"}`)
	}))
	defer huge.Close()
	wrong := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"type":4}`)
	}))
	defer wrong.Close()

	for name, url := range map[string]string{
		"accepts forged signatures": lax.URL,
		"redirects":                 redirect.URL,
		"huge answer":               huge.URL,
		"wrong answer":              wrong.URL,
		"not http":                  "ftp://example.com/x",
		"credentials":               "https://user:pw@example.com/",
		"relative":                  "/interactions",
	} {
		r := e.setEndpoint(a, url)
		m := e.expect(r, 400, 50035)
		if _, ok := m["errors"].(map[string]any)["interactions_endpoint_url"]; !ok {
			t.Errorf("%s: error does not name the field: %s", name, r.Body)
		}
	}
	got, _ := e.store.GetApplication(context.Background(), a.ID)
	if got.InteractionsEndpointURL != "" {
		t.Fatalf("a refused URL was stored: %q", got.InteractionsEndpointURL)
	}
}

// fakeResolver resolves names from a table.
type fakeResolver map[string][]string

func (f fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	var out []net.IPAddr
	for _, s := range f[host] {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no such host %s", host)
	}
	return out, nil
}

// TestPrivateEndpointsRefused runs with the production address policy.
func TestPrivateEndpointsRefused(t *testing.T) {
	e := newEnv(t, func(c *bots.Config, d *bots.Deps) {
		d.Resolver = fakeResolver{
			"internal.example": {"10.1.2.3"},
			"mixed.example":    {"93.184.215.14", "127.0.0.1"},
			"metadata.example": {"169.254.169.254"},
		}
	})
	a := e.createApp("Sneaky")
	for _, u := range []string{
		"http://127.0.0.1:8080/", "http://10.0.0.1/x", "http://169.254.169.254/latest/meta-data", "http://[::1]/",
		"http://[fd00::1]/", "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/", "http://0.0.0.0/",
		"https://internal.example/i", "https://mixed.example/i", "https://metadata.example/", "https://nxdomain.example/",
	} {
		r := e.setEndpoint(a, u)
		if r.Status != 400 || r.code(t) != 50035 {
			t.Errorf("%s: %d %s, want 400 50035", u, r.Status, r.Body)
		}
	}
}
