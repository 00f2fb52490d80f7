package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

const testNode = "gw-test"

// fakeBackend is a hand-written Backend: tokens map to users, and
// Subscribe and Disconnect are reported on channels.
type fakeBackend struct {
	mu       sync.Mutex
	users    map[string]snowflake.ID
	guilds   []snowflake.ID
	err      error // returned by Identify when set
	subs     chan event.Session
	discs    chan event.Session
	identify func(token string, s event.Session) error
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		users:  map[string]snowflake.ID{"tok-alice": 1001, "tok-bob": 1002},
		guilds: []snowflake.ID{41771983423143937, 41771983423143938},
		subs:   make(chan event.Session, 64),
		discs:  make(chan event.Session, 64),
	}
}

func (b *fakeBackend) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return event.Ready{}, b.err
	}
	if b.identify != nil {
		if err := b.identify(token, s); err != nil {
			return event.Ready{}, err
		}
	}
	uid, ok := b.users[token]
	if !ok {
		return event.Ready{}, ErrAuthenticationFailed
	}
	user, _ := json.Marshal(map[string]any{"id": uid, "username": "u" + uid.String(), "discriminator": "0",
		"global_name": nil, "avatar": nil, "bot": true})
	return event.Ready{UserID: uid, Bot: true, User: user, Guilds: b.guilds, ApplicationID: uid, ApplicationFlags: 0}, nil
}

func (b *fakeBackend) Subscribe(ctx context.Context, s event.Session) error {
	b.subs <- s
	return nil
}

func (b *fakeBackend) Disconnect(ctx context.Context, s event.Session) {
	b.discs <- s
}

// waitSession receives from ch or fails after a generous timeout.
func waitSession(t *testing.T, ch chan event.Session, what string) event.Session {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return event.Session{}
	}
}

// testGateway is a node behind an httptest server.
type testGateway struct {
	node    *Node
	backend *fakeBackend
	srv     *httptest.Server
}

func newTestGateway(t *testing.T, cfg Config) *testGateway {
	t.Helper()
	if cfg.Node == "" {
		cfg.Node = testNode
	}
	b := newFakeBackend()
	n, err := NewNode(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/gateway", n)
	mux.Handle("/gateway/", n)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		n.Close()
		srv.Close()
	})
	return &testGateway{node: n, backend: b, srv: srv}
}

func (g *testGateway) url(query string) string {
	return "ws" + strings.TrimPrefix(g.srv.URL, "http") + "/gateway" + query
}

// wireFrame is a decoded server frame.
type wireFrame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

// client is a raw gorilla/websocket gateway client.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func (g *testGateway) dial(t *testing.T, query string) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(g.url(query), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

func (c *client) send(v any) {
	c.t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// read returns the next frame, failing on timeout or close.
func (c *client) read() wireFrame {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	mt, b, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if mt != websocket.TextMessage {
		c.t.Fatalf("read: message type %d, want text", mt)
	}
	var f wireFrame
	if err := json.Unmarshal(b, &f); err != nil {
		c.t.Fatalf("read: %v in %s", err, b)
	}
	return f
}

// readDispatch reads the next frame and checks it is dispatch t with seq s.
func (c *client) readDispatch(t string, seq int64) wireFrame {
	c.t.Helper()
	f := c.read()
	if f.Op != OpDispatch || f.T == nil || *f.T != t || f.S == nil || *f.S != seq {
		c.t.Fatalf("got op %d t %v s %v, want dispatch %s seq %d", f.Op, deref(f.T), deref(f.S), t, seq)
	}
	return f
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// expectClose reads until the server closes and checks the close code.
func (c *client) expectClose(code int) {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, b, err := c.ws.ReadMessage()
		if err == nil {
			c.t.Logf("frame before close: %.200s", b)
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("want close %d, got %v", code, err)
		}
		if ce.Code != code {
			c.t.Fatalf("close code %d (%q), want %d", ce.Code, ce.Text, code)
		}
		return
	}
}

// hello reads HELLO and checks its shape.
func (c *client) hello() time.Duration {
	c.t.Helper()
	f := c.read()
	if f.Op != OpHello || f.S != nil || f.T != nil {
		c.t.Fatalf("first frame op %d, want HELLO", f.Op)
	}
	var d struct {
		HeartbeatInterval int64 `json:"heartbeat_interval"`
	}
	if err := json.Unmarshal(f.D, &d); err != nil || d.HeartbeatInterval <= 0 {
		c.t.Fatalf("HELLO d %s", f.D)
	}
	return time.Duration(d.HeartbeatInterval) * time.Millisecond
}

func identifyFrame(token string, intents uint64, extra map[string]any) map[string]any {
	d := map[string]any{
		"token":      token,
		"intents":    intents,
		"properties": map[string]any{"os": "linux", "browser": "test", "device": "test"},
	}
	for k, v := range extra {
		d[k] = v
	}
	return map[string]any{"op": OpIdentify, "d": d}
}

// readyD is READY's d as the tests read it.
type readyD struct {
	V                int               `json:"v"`
	User             map[string]any    `json:"user"`
	Guilds           []map[string]any  `json:"guilds"`
	SessionID        string            `json:"session_id"`
	SessionType      string            `json:"session_type"`
	ResumeGatewayURL string            `json:"resume_gateway_url"`
	Shard            []int             `json:"shard"`
	Application      map[string]any    `json:"application"`
	PrivateChannels  []json.RawMessage `json:"private_channels"`
	Raw              map[string]json.RawMessage
}

// identify runs HELLO → IDENTIFY → READY and returns READY's d.
func (c *client) identify(token string) readyD {
	c.t.Helper()
	c.hello()
	c.send(identifyFrame(token, 1|1<<9, nil))
	return c.ready()
}

func (c *client) ready() readyD {
	c.t.Helper()
	f := c.readDispatch("READY", 1)
	var r readyD
	if err := json.Unmarshal(f.D, &r); err != nil {
		c.t.Fatal(err)
	}
	if err := json.Unmarshal(f.D, &r.Raw); err != nil {
		c.t.Fatal(err)
	}
	return r
}

// deliver sends one dispatch to the given sessions through the Sink.
func (g *testGateway) deliver(t string, payload string, ids ...event.SessionID) {
	b := event.Batch{Type: t, Payloads: []json.RawMessage{json.RawMessage(payload)}}
	for _, id := range ids {
		b.Targets = append(b.Targets, event.Target{Session: id})
	}
	g.node.Deliver(context.Background(), testNode, b)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
