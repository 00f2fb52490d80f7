package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/api"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/gatewayrole"
)

// server is a real Concord in one process: the Pebble store, the guild
// service, a gateway node and the REST API on one HTTP listener, wired as
// `concord dev` wires them but without the REST rate limiter and the
// identify admission (thousands of sequences would spend their time in
// 429s and identify buckets, which other tests cover).
type server struct {
	url    string // http://host:port
	wsURL  string // ws://host:port/gateway?v=10&encoding=json
	client *http.Client
	names  atomic.Int64
}

// sinkRef forwards the guild service's batches to the gateway node, which
// exists only after the service.
type sinkRef struct{ node atomic.Pointer[gateway.Node] }

func (s *sinkRef) Deliver(ctx context.Context, node string, b event.Batch) {
	if n := s.node.Load(); n != nil {
		n.Deliver(ctx, node, b)
	}
}

// storeDir is where the test's Pebble store lives: in /dev/shm when the
// machine has it, so the store's fsync per write (which this test does
// not examine; test/e2e kills processes for that) costs memory, not disk.
func storeDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "concord-model-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func startServer(t testing.TB) *server {
	t.Helper()
	st, err := pebble.New(pebble.Config{Dir: storeDir(t)})
	if err != nil {
		t.Fatalf("pebble: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := auth.New(auth.Config{Key: []byte(strings.Repeat("k", 32)), Password: auth.Params{Time: 1, MemoryKiB: 64, Threads: 1}}, st)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	sink := &sinkRef{}
	svc, err := guild.NewService(guild.Config{Logger: quiet}, guild.Deps{Store: st, Sink: sink, IDs: ids, Auth: iss})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	node, err := gateway.NewNode(gateway.Config{Node: "node-1", HeartbeatInterval: 59 * time.Second, Logger: quiet},
		gatewayrole.GuildBackend{Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	sink.node.Store(node)
	rest := api.New(api.Config{Logger: quiet}, api.Deps{Store: st, Guilds: svc, Auth: iss, IDs: ids, Users: svc})
	mux := http.NewServeMux()
	mux.Handle("/api/", rest)
	mux.Handle("/gateway", node)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &server{
		url:    hs.URL,
		wsURL:  "ws" + strings.TrimPrefix(hs.URL, "http") + "/gateway?v=10&encoding=json",
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
}

// tb is what the harness needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// reply is one REST answer.
type reply struct {
	Status int
	Body   []byte
}

// code is the Discord error code of an error body (0 when none).
func (r reply) code() int {
	var e struct {
		Code int `json:"code"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Code
}

func (r reply) ok() bool { return r.Status/100 == 2 }

func (r reply) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// call sends one REST request; a transport failure or a non-JSON body is
// a test failure, anything else is returned.
func (s *server) call(t tb, method, path, token string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.url+"/api/v10"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	if len(raw) > 0 && res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s: %d with Content-Type %q: %s", method, path, res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	return reply{Status: res.StatusCode, Body: raw}
}

// must calls and requires a 2xx, decoding into out when given.
func (s *server) must(t tb, method, path, token string, body, out any) {
	t.Helper()
	r := s.call(t, method, path, token, body)
	if !r.ok() {
		t.Fatalf("%s %s: %s", method, path, r)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, r.Body, err)
		}
	}
}

// account is a registered user: REST token (with "Bot " for bots) and the
// raw token the gateway takes.
type account struct {
	Name    string
	ID      snowflake.ID
	Token   string
	Gateway string
	Bot     bool
}

func (s *server) register(t tb, name string, bot bool) account {
	t.Helper()
	name = fmt.Sprintf("%s-%d", name, s.names.Add(1))
	var out struct {
		Token  string       `json:"token"`
		UserID snowflake.ID `json:"user_id"`
	}
	s.must(t, "POST", "/auth/register", "", map[string]any{"username": name, "password": "password123", "bot": bot}, &out)
	a := account{Name: name, ID: out.UserID, Token: out.Token, Gateway: out.Token, Bot: bot}
	if bot {
		a.Token = "Bot " + out.Token
	}
	return a
}

// dispatch is one op 0 frame.
type dispatch struct {
	T string          `json:"t"`
	S int64           `json:"s"`
	D json.RawMessage `json:"d"`
}

// gwConn is a real gateway session (the shared test client), its
// dispatches read in arrival order.
type gwConn struct{ c *gwtest.Conn }

// Intents every model client asks for: GUILDS, GUILD_MESSAGES,
// DIRECT_MESSAGES, GUILD_MESSAGE_REACTIONS, MESSAGE_CONTENT.
const clientIntents = 1<<0 | 1<<9 | 1<<10 | 1<<12 | 1<<15

// dial opens a connection and sends IDENTIFY (resume nil) or RESUME.
func (s *server) dial(t tb, a account, resume *resumeState) *gwConn {
	t.Helper()
	o := gwtest.Options{Name: a.Name, Intents: clientIntents}
	if resume != nil {
		o.Resume = &gwtest.Resume{SessionID: resume.sessionID, Seq: resume.seq}
	}
	c, err := gwtest.Dial(s.wsURL, a.Gateway, o)
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	return &gwConn{c: c}
}

// dispatches converts the client's frames to the model's shape.
func dispatches(fs []gwtest.Frame) []dispatch {
	out := make([]dispatch, len(fs))
	for i, f := range fs {
		out[i] = dispatch{T: f.Type, S: f.Seq, D: f.D}
	}
	return out
}

// snapshot returns the dispatches received so far.
func (c *gwConn) snapshot() []dispatch { return dispatches(c.c.Frames()) }

// waitFor waits until cond holds on the dispatches received, failing
// after 10 s, on op 9 or when the connection ends, with what.
func (c *gwConn) waitFor(t tb, what string, cond func([]dispatch) bool) []dispatch {
	t.Helper()
	var got []dispatch
	err := c.c.Await(what, 10*time.Second, func(fs []gwtest.Frame) bool {
		got = dispatches(fs)
		return cond(got) || c.c.InvalidSession()
	})
	if err != nil {
		t.Fatalf("waiting for %s (%d dispatches received): %v", what, len(got), err)
	}
	if !cond(got) {
		t.Fatalf("waiting for %s: op 9 invalid session", what)
	}
	return got
}

// settled sends a heartbeat and waits for its ACK: every op the client
// sent before it has been handled.
func (c *gwConn) settled(t tb) {
	t.Helper()
	if err := c.c.Settle(10 * time.Second); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

// closeNormally ends the session (close code 1000: no resume).
func (c *gwConn) closeNormally() { c.c.CloseNormally() }

// drop cuts the TCP connection without a close frame, as a network
// failure does: the session stays resumable.
func (c *gwConn) drop() { c.c.Close() }

// resumeState is what a client keeps to RESUME.
type resumeState struct {
	sessionID string
	seq       int64
}

// hasType reports whether a dispatch of type typ arrived.
func hasType(typ string) func([]dispatch) bool {
	return func(fs []dispatch) bool {
		for _, f := range fs {
			if f.T == typ {
				return true
			}
		}
		return false
	}
}
