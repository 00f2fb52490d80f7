// Package livetest runs the live-comments roles over real HTTP for the
// contract tests: the API, router, gateway and archiver on whichever
// backends a test gives (the in-process defaults, or Kafka, Redis and
// Cassandra), with users and tokens from runtime/domain/auth on a Pebble user
// store, and an SSE client that follows a viewer's stream.
package livetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	userstore "github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/api"
	"github.com/concord-chat/concord/runtime/domain/live/archiver"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/pebblestore"
	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/recent"
	"github.com/concord-chat/concord/runtime/domain/live/relay"
	"github.com/concord-chat/concord/runtime/domain/live/router"
)

// Log is what the roles need from the event log.
type Log interface {
	eventlog.Log
	eventlog.Pinned
}

// Cache is the recent cache and the nonces.
type Cache interface {
	live.Recent
	live.Nonces
}

// Backends are the stores the roles run on. Nil fields get the
// in-process defaults.
type Backends struct {
	Log      Log
	Cache    Cache
	Store    live.Store
	Relay    live.Relay
	Board    live.Board
	Counters live.Counters
	// Users are the accounts the issuer and the API read (nil: a Pebble
	// user store of the run's own).
	Users store.Users
	// Topics, when set, isolates a run on shared servers.
	Topics live.Topics
	// Friends, when set, is the gateways' relationships (the friends
	// boost of a sampled stream's rest tier).
	Friends live.Friends
	// RedisPrefix is the key and channel prefix of the Redis adapters,
	// for processes that join the run.
	RedisPrefix string
}

// Options tune the roles for a test.
type Options struct {
	Gateway gateway.Config
	// NoRouter leaves the router out (the fault tests run their own).
	NoRouter bool
	// NoArchiver leaves the archiver out (StartArchiver runs one later).
	NoArchiver bool
	// RouterNow, when set, is the router's clock (sampled mode tests).
	RouterNow func() time.Time
	// API is the API's configuration; Start sets its Topics, Logger and
	// Registerer.
	API api.Config
	// Registerer, when set, receives the API's, the router's and the
	// first gateway's metrics (the benchmarks read the per-hop
	// histograms from it).
	Registerer prometheus.Registerer
}

// Env is a running set of roles.
type Env struct {
	T        testing.TB
	B        Backends
	API      *api.API
	Gateway  *gateway.Gateway
	URL      string // the API's base URL (it also serves /live)
	Issuer   *auth.Issuer
	Users    store.Users
	ctx      context.Context
	reg      prometheus.Registerer // the first router's metrics, then nil
	nextUser atomic.Int64
	ids      *snowflake.Generator

	// Remote is set for an env whose roles run in a Concord process (see
	// Remote); nil for one Start runs here.
	Remote *RemoteRoles

	routerNow func() time.Time

	// running counts the roles' Run loops; the first cleanup of Start
	// cancels them and waits, so no role touches a closed store.
	running sync.WaitGroup
}

// spawn runs f(ctx) as one of the env's role loops.
func (e *Env) spawn(ctx context.Context, f func(context.Context) error) {
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		f(ctx)
	}()
}

// RemoteRoles is how the suite reaches roles running in a Concord
// process rather than in the test: accounts come from its chat API, the
// gateway's open viewers from its metrics.
type RemoteRoles struct {
	// NewUser creates an account and returns it with its token.
	NewUser func(t testing.TB) User
	// Viewers counts the SSE viewers the gateways serving URL hold open.
	Viewers func(t testing.TB) int
	// StartGateway runs one more gateway of the deployment, with its own
	// URL, that Kill stops as a crash would; nil when the deployment
	// has one gateway (concord dev).
	StartGateway func(t testing.TB, cfg gateway.Config) ExtraGateway
}

// Remote is the env of a Concord process serving the contract at url.
func Remote(t testing.TB, url string, r RemoteRoles) *Env {
	return &Env{T: t, URL: url, Remote: &r, ctx: context.Background()}
}

// Viewers is the number of SSE viewers the env's gateway holds open.
func (e *Env) Viewers() int {
	if e.Remote != nil {
		return e.Remote.Viewers(e.T)
	}
	return e.Gateway.Viewers()
}

// CanStartGateway reports whether StartGateway can run another gateway.
func (e *Env) CanStartGateway() bool { return e.Remote == nil || e.Remote.StartGateway != nil }

// Start runs the API (serving the gateway's /live too), a router, an
// archiver and a gateway on b.
func Start(t testing.TB, b Backends, o Options) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if b.Log == nil {
		l, err := memlog.New(memlog.Config{Dir: t.TempDir(), NoSync: true, CommitInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		b.Log = l
	}
	if b.Cache == nil {
		b.Cache = recent.New()
	}
	if b.Store == nil {
		s, err := pebblestore.Open(t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		b.Store = s
	}
	if b.Relay == nil {
		b.Relay = relay.New()
	}
	if b.Board == nil {
		b.Board = board.New()
	}
	if b.Counters == nil {
		c, err := mem.New(mem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		b.Counters = c
	}
	if b.Topics.Comments == "" {
		b.Topics = live.TopicsFor(fmt.Sprintf("t%d.", time.Now().UnixNano()))
	}
	users := b.Users
	if users == nil {
		us, err := userstore.New(userstore.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { us.Close() })
		users = us
	}
	iss, err := auth.New(auth.Config{Key: bytes.Repeat([]byte("k"), 32)}, users)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflake.New(snowflake.Config{Worker: int(time.Now().UnixNano() % 31)})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, B: b, Issuer: iss, Users: users, ctx: ctx, ids: ids, reg: o.Registerer, routerNow: o.RouterNow}
	log := slog.New(slog.DiscardHandler)
	gcfg := o.Gateway
	gcfg.Logger = log
	if gcfg.Registerer == nil {
		gcfg.Registerer = o.Registerer
	}
	e.Gateway = newGateway(t, b, iss, gcfg)
	e.spawn(ctx, e.Gateway.Run)
	acfg := o.API
	acfg.Topics, acfg.Logger, acfg.Registerer = b.Topics, log, o.Registerer
	e.API, err = api.New(acfg, api.Deps{
		Verifier: iss, Users: users, IDs: ids, Log: b.Log, Store: b.Store, Recent: b.Cache, Nonces: b.Cache,
		Counters: b.Counters, Board: b.Board, Live: e.Gateway,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.spawn(ctx, e.API.Run)
	<-e.API.Synced()
	if !o.NoRouter {
		e.StartRouter(ctx)
	}
	if !o.NoArchiver {
		e.StartArchiver(ctx)
	}
	srv := httptest.NewServer(e.API)
	t.Cleanup(srv.Close)
	// Registered last, so it runs first: the roles stop before the
	// backends above close.
	t.Cleanup(func() {
		cancel()
		e.running.Wait()
	})
	e.URL = srv.URL
	return e
}

// StartRouter runs one more router member of the run's group until ctx
// ends.
func (e *Env) StartRouter(ctx context.Context) {
	cfg := RouterConfig(e.B.Topics)
	cfg.Registerer, e.reg = e.reg, nil
	cfg.Now = e.routerNow
	r, err := router.New(cfg, router.Deps{Log: e.B.Log, Recent: e.B.Cache, Relay: e.B.Relay, Board: e.B.Board})
	if err != nil {
		e.T.Fatal(err)
	}
	e.spawn(ctx, r.Run)
}

// StartArchiver runs the run's archiver until ctx ends.
func (e *Env) StartArchiver(ctx context.Context) {
	arch, err := archiver.New(archiver.Config{Topics: e.B.Topics, Group: e.B.Topics.Comments + ".archiver", Logger: slog.New(slog.DiscardHandler)},
		archiver.Deps{Log: e.B.Log, Store: e.B.Store})
	if err != nil {
		e.T.Fatal(err)
	}
	e.spawn(ctx, arch.Run)
}

// RouterConfig is the router configuration of a run on topics: every
// router of the run, in this process or another, joins the same groups.
func RouterConfig(topics live.Topics) router.Config {
	return router.Config{Topics: topics, Group: topics.Comments + ".router",
		ReactionsGroup: topics.Reactions + ".router", Logger: slog.New(slog.DiscardHandler)}
}

// newGateway builds a gateway on b (spawn runs it).
func newGateway(t testing.TB, b Backends, v live.Verifier, cfg gateway.Config) *gateway.Gateway {
	g, err := gateway.New(cfg, gateway.Deps{Relay: b.Relay, Recent: b.Cache, Store: b.Store, Board: b.Board, Verifier: v, Friends: b.Friends})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// User is an account with a token.
type User struct {
	ID    snowflake.ID
	Name  string
	Token string
}

// NewUser creates an account (an hour old) and mints its token.
func (e *Env) NewUser() User {
	e.T.Helper()
	if e.Remote != nil {
		return e.Remote.NewUser(e.T)
	}
	id, _ := e.ids.Next()
	// Unique across envs: envs of one run may share the account store.
	name := fmt.Sprintf("user%d_%d", e.nextUser.Add(1), id)
	u := store.User{ID: id, Username: name, CreatedAt: time.Now().Add(-time.Hour)}
	if err := e.Users.CreateUser(context.Background(), u); err != nil {
		e.T.Fatal(err)
	}
	return User{ID: id, Name: name, Token: e.Issuer.Mint(u)}
}

// Response is a decoded HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Map decodes the body as an object.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Do sends a request with token (may be empty) and a body (a string is
// sent as is, anything else as JSON).
func (e *Env) Do(method, path, token string, body any) Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Stream is the Stream object.
type Stream struct {
	ID        string  `json:"id"`
	CreatorID string  `json:"creator_id"`
	Title     string  `json:"title"`
	State     string  `json:"state"`
	StartedAt string  `json:"started_at"`
	EndedAt   *string `json:"ended_at"`
	Viewers   int64   `json:"viewers"`
	Sampled   bool    `json:"sampled"`
	StreamURL string  `json:"stream_url,omitempty"`
}

// Comment is the Comment object.
type Comment struct {
	ID       string `json:"id"`
	StreamID string `json:"stream_id"`
	Seq      int64  `json:"seq"`
	Author   struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"author"`
	Text      string `json:"text"`
	VideoTSMs int64  `json:"video_ts_ms"`
	CreatedAt string `json:"created_at"`
}

// CreateStream creates a stream of u.
func (e *Env) CreateStream(u User, title string) Stream {
	e.T.Helper()
	r := e.Do("POST", "/v1/streams", u.Token, map[string]any{"title": title})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create stream = %d %s", r.Status, r.Body)
	}
	var s Stream
	r.JSON(e.T, &s)
	return s
}

// Post posts a comment and requires a 201.
func (e *Env) Post(u User, stream, text string, vts int64) Comment {
	e.T.Helper()
	r := e.Do("POST", "/v1/streams/"+stream+"/comments", u.Token, map[string]any{"text": text, "video_ts_ms": vts})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("post %q = %d %s", text, r.Status, r.Body)
	}
	var c Comment
	r.JSON(e.T, &c)
	return c
}

// Eventually polls f every 20 ms until it returns "" or the timeout passes,
// then fails with f's last answer.
func (e *Env) Eventually(timeout time.Duration, f func() string) {
	e.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ExtraGateway is a gateway of its own, on its own HTTP server.
type ExtraGateway struct {
	*gateway.Gateway
	URL  string
	Kill func()
}

// StartGateway runs another gateway on the run's backends; Kill drops its
// connections and stops it, as a crash would for its viewers.
func (e *Env) StartGateway(cfg gateway.Config) ExtraGateway {
	if e.Remote != nil {
		return e.Remote.StartGateway(e.T, cfg)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cfg.Logger = slog.New(slog.DiscardHandler)
	g := newGateway(e.T, e.B, e.Issuer, cfg)
	e.spawn(ctx, g.Run)
	srv := httptest.NewServer(g)
	e.T.Cleanup(srv.Close)
	return ExtraGateway{Gateway: g, URL: srv.URL, Kill: func() {
		// As a crash: no new connection is accepted, the open ones drop.
		srv.Listener.Close()
		cancel()
		srv.CloseClientConnections()
	}}
}
