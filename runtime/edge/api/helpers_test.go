package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/adapters/store/objects"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
)

// sink records deliveries per session.
type sink struct {
	mu      sync.Mutex
	got     map[event.SessionID][]delivery
	changed chan struct{}
}

type delivery struct {
	Type    string
	Payload json.RawMessage
}

func (s *sink) Deliver(_ context.Context, _ string, b event.Batch) {
	s.mu.Lock()
	for _, t := range b.Targets {
		s.got[t.Session] = append(s.got[t.Session], delivery{b.Type, b.Payloads[t.Variant]})
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *sink) of(id event.SessionID) []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.got[id]...)
}

func (s *sink) waitFor(t testing.TB, id event.SessionID, what string, cond func([]delivery) bool) []delivery {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ds := s.of(id)
		if cond(ds) {
			return ds
		}
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type env struct {
	t testing.TB
	// url is the base URL requests go to: the in-process handler's test
	// server, or the front node of the topology (topologyURL).
	url string
	// srv is the in-process server; nil against a topology.
	srv    *httptest.Server
	guilds *guild.Service
	store  store.Store
	sink   *sink
	// tag makes usernames unique when the store is shared between tests
	// (the Cassandra run); empty on a fresh Pebble store per test.
	tag  string
	ids  *snowflake.Generator
	auth *auth.Issuer
	// objs is the object store attachments go to.
	objs objects.Store
	// tokens are the accounts' tokens by user id: a gateway session
	// against a topology identifies with them.
	tokens map[snowflake.ID]string
	// conns are the gateway sessions against a topology; nil in process.
	conns *gatewaySessions
	// obey429 resends a request answered 429 after its Retry-After (the
	// route walk's `concord dev` applies the REST rate limits).
	obey429 bool
	// metrics is the in-process guild service's registry; nil against a
	// topology.
	metrics *prometheus.Registry
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvConfig(t, Config{})
}

// newEnvConfig is newEnv with the REST handler's Config (its Now, say).
func newEnvConfig(t testing.TB, cfg Config) *env {
	t.Helper()
	if u := topologyURL(); u != "" {
		if !reflect.ValueOf(cfg).IsZero() {
			t.Skip("in-process only: the test sets the REST handler's Config, which a running topology's flags fix")
		}
		return newTopologyEnv(t, u)
	}
	st, tag := openTestStore(t)
	t.Cleanup(func() { st.Close() })
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := auth.New(auth.Config{Key: []byte(strings.Repeat("s", 32)), Password: auth.Params{Time: 1, MemoryKiB: 64, Threads: 1}}, st)
	if err != nil {
		t.Fatal(err)
	}
	sk := &sink{got: map[event.SessionID][]delivery{}, changed: make(chan struct{}, 1)}
	reg := prometheus.NewRegistry()
	svc, err := guild.NewService(guild.Config{Registerer: reg}, guild.Deps{Store: st, Sink: sk, IDs: ids, Auth: iss})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	objs, err := objects.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := New(cfg, Deps{Store: st, Guilds: svc, Auth: iss, IDs: ids, Objects: objs})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, srv: srv, guilds: svc, store: st, sink: sk, ids: ids, auth: iss, tag: tag, objs: objs, tokens: map[snowflake.ID]string{}, metrics: reg}
}

// openTestStore opens the store the REST tests run on: a fresh Pebble
// store, or, when CONCORD_API_TEST_STORE names one
// (cassandra://host:port/keyspace, as `make test` sets it), that shared
// store with a random tag for unique usernames.
func openTestStore(t testing.TB) (store.Store, string) {
	t.Helper()
	if u := os.Getenv("CONCORD_API_TEST_STORE"); u != "" {
		cfg, err := cassandra.ParseURL(u)
		if err != nil {
			t.Fatalf("CONCORD_API_TEST_STORE: %v", err)
		}
		st, err := cassandra.New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		var b [3]byte
		_, _ = rand.Read(b[:])
		return st, "-" + hex.EncodeToString(b[:])
	}
	st, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return st, ""
}

// name is a test username made unique for the store in use.
func (e *env) name(n string) string { return n + e.tag }

// resp is a decoded response.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// code returns the Discord error code of an error body.
func (r resp) code(t testing.TB) int {
	t.Helper()
	var e struct {
		Code *int `json:"code"`
	}
	r.json(t, &e)
	if e.Code == nil {
		t.Fatalf("error body without code: %s", r.Body)
	}
	return *e.Code
}

// call sends a request; body is JSON-encoded unless it is a string or
// []byte. With e.obey429 a 429 is answered as a bot library does: the
// request is sent again after the Retry-After the server gave.
func (e *env) call(method, path, token string, body any) resp {
	e.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			e.t.Fatal(err)
		}
	}
	for {
		r := e.send(method, path, token, body != nil, raw)
		if r.Status != http.StatusTooManyRequests || !e.obey429 {
			return r
		}
		time.Sleep(retryAfter(e.t, r.Header, r.Body))
	}
}

// send is one request of call.
func (e *env) send(method, path, token string, hasBody bool, raw []byte) resp {
	e.t.Helper()
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); len(out) > 0 && ct != "application/json" {
		e.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	switch res.StatusCode {
	case 200, 201, 204, 400, 401, 403, 404, 429, 503:
	default:
		e.t.Fatalf("%s %s: unexpected status %d: %s", method, path, res.StatusCode, out)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: out}
}

// ok calls and requires a 2xx, decoding into out when given.
func (e *env) ok(method, path, token string, body any, out any) resp {
	e.t.Helper()
	r := e.call(method, path, token, body)
	if r.Status/100 != 2 {
		e.t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
	}
	if out != nil {
		r.json(e.t, out)
	}
	return r
}

// fail calls and requires the given status and Discord code.
func (e *env) fail(method, path, token string, body any, status, code int) resp {
	e.t.Helper()
	r := e.call(method, path, token, body)
	if r.Status != status || r.code(e.t) != code {
		e.t.Fatalf("%s %s: got %d %s, want %d code %d", method, path, r.Status, r.Body, status, code)
	}
	return r
}

type account struct {
	ID    snowflake.ID
	Token string
}

func (e *env) register(name string, bot bool) account {
	e.t.Helper()
	var out struct {
		Token  string       `json:"token"`
		UserID snowflake.ID `json:"user_id"`
	}
	e.ok("POST", "/api/v10/auth/register", "", map[string]any{"username": e.name(name), "password": "password123", "bot": bot}, &out)
	prefix := ""
	if bot {
		prefix = "Bot "
	}
	e.tokens[out.UserID] = prefix + out.Token
	return account{ID: out.UserID, Token: prefix + out.Token}
}

// retryAfter is how long a 429 says to wait: its body's retry_after
// (fractional seconds), else its Retry-After header.
func retryAfter(t testing.TB, h http.Header, body []byte) time.Duration {
	t.Helper()
	var b struct {
		RetryAfter *float64 `json:"retry_after"`
	}
	if json.Unmarshal(body, &b) == nil && b.RetryAfter != nil {
		return time.Duration(*b.RetryAfter * float64(time.Second))
	}
	after, err := strconv.ParseFloat(h.Get("Retry-After"), 64)
	if err != nil {
		t.Fatalf("429 without a retry_after or Retry-After: %v %s", h, body)
	}
	return time.Duration(after * float64(time.Second))
}
