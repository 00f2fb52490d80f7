package apirole

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd/etcdtest"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/runtime/services/wiring/wiringtest"
)

// discardSink drops the guild service's events: no session is attached.
type discardSink struct{}

func (discardSink) Deliver(context.Context, string, event.Batch) {}

// roleWorld is one process's parts with a guild service provided under
// wiring.GuildService, as the guild role provides it, and a user's token.
type roleWorld struct {
	parts wiring.Parts
	mux   *http.ServeMux
	group *lifecycle.Group
	token string
}

func newRoleWorld(t *testing.T, reg registry.Registry, roles ...string) *roleWorld {
	t.Helper()
	cfg := config.Default()
	cfg.Registry, cfg.Node, cfg.Roles = "mem", "n1", roles
	cfg.LeaseTTL = 2 * time.Second
	seams := &wiring.Seams{}
	parts := wiringtest.Parts(t, seams, cfg)
	parts.Metrics, parts.Registry = prometheus.NewRegistry(), reg
	if reg != nil {
		// A node of `concord serve`: its guilds are placed on the ring
		// (wiring.Placement), as the root gives it.
		if _, err := wiring.Ring(context.Background(), seams, reg, registry.RoleGuild, registry.LocalRingConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := guild.NewService(guild.Config{}, guild.Deps{Store: parts.Store, Sink: discardSink{}, IDs: parts.IDs, Auth: parts.Auth})
	if err != nil {
		t.Fatal(err)
	}
	wiring.Provide(seams, wiring.GuildService, svc)
	// The bot store and revocation path, opened once by the root.
	apps, err := BotStore(context.Background(), parts)
	if err != nil {
		t.Fatal(err)
	}
	wiring.Provide(seams, wiring.BotStore, apps)
	rev, err := OpenRevocations(context.Background(), parts)
	if err != nil {
		t.Fatal(err)
	}
	wiring.Provide[wiring.RevocationPath](seams, wiring.Revocations, rev)
	u := wiringtest.User(t, parts, "alice")
	w := &roleWorld{parts: parts, mux: http.NewServeMux(), group: &lifecycle.Group{}, token: parts.Auth.Mint(u)}
	t.Cleanup(func() {
		_ = w.group.Stop(context.Background())
		_ = seams.Close()
		_ = svc.Close()
	})
	return w
}

// build builds the api package's roles as the role table lists them.
func (w *roleWorld) build(t *testing.T, want func(string) bool) {
	t.Helper()
	if err := wiring.Build(context.Background(), []wiring.Role{GuildREST, Role}, want, w.parts, w.mux, w.group); err != nil {
		t.Fatal(err)
	}
	w.group.Start(context.Background())
}

// get calls path on h with the world's token.
func (w *roleWorld) get(t *testing.T, h http.Handler, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", w.token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return rec, body
}

// In `concord dev` the two roles build into one REST endpoint on /api/:
// the core API, the bot platform and GET /gateway/bot behind the rate
// limits, over the in-process guild service; they provide the bot store,
// the bot platform (whose lease manager is the gateway role's) and the REST handler.
func TestDevBuildsAPIRole(t *testing.T) {
	w := newRoleWorld(t, nil)
	w.build(t, func(string) bool { return true })
	rest, ok := wiring.Lookup(w.parts.Seams, wiring.REST)
	if !ok {
		t.Fatal("no REST handler provided")
	}
	if _, pattern := w.mux.Handler(httptest.NewRequest(http.MethodGet, "/api/v10/users/@me", nil)); pattern != "/api/" {
		t.Fatalf("/api/ mounted as %q", pattern)
	}
	bp, ok := wiring.Lookup(w.parts.Seams, BotsKey)
	if !ok || bp == nil {
		t.Fatal("no bot platform provided")
	}
	if _, ok := wiring.Lookup(w.parts.Seams, wiring.Leases); ok || bp.Leases() != nil {
		t.Fatal("the api role provided a lease manager: the gateway role runs the process's one")
	}
	if st, err := BotStore(context.Background(), w.parts); err != nil || st != bp.Store() {
		t.Fatalf("BotStore = %v, %v; the bot platform runs on %v", st, err, bp.Store())
	}
	// The core API answers for the token's user.
	rec, me := w.get(t, w.mux, "/api/v10/users/@me")
	if rec.Code != http.StatusOK || me["username"] != "alice" {
		t.Fatalf("GET /users/@me = %d %v", rec.Code, me)
	}
	if rec.Header().Get("X-RateLimit-Limit") == "" {
		t.Fatal("REST answered without the rate limit headers")
	}
	// GET /gateway/bot is the api role's, from the counters.
	rec, gb := w.get(t, rest, "/api/v10/gateway/bot")
	if rec.Code != http.StatusOK || gb["session_start_limit"] == nil {
		t.Fatalf("GET /gateway/bot = %d %v", rec.Code, gb)
	}
	// Without a token it is the API's 401, code 40001 like every other
	// endpoint's (discord.js tells a bad token from other 401s by it).
	anon := httptest.NewRecorder()
	rest.ServeHTTP(anon, httptest.NewRequest(http.MethodGet, "/api/v10/gateway/bot", nil))
	if anon.Code != http.StatusUnauthorized || !strings.Contains(anon.Body.String(), `"code":40001`) {
		t.Fatalf("GET /gateway/bot without a token = %d %s, want 401 code 40001", anon.Code, anon.Body)
	}
	// The bot platform's routes are mounted: a user's token is no
	// application's (Discord answers 401 to a non-bot's @me application).
	rec, _ = w.get(t, rest, "/api/v10/oauth2/applications/@me")
	if rec.Code == http.StatusNotFound {
		t.Fatalf("GET /oauth2/applications/@me = 404: the bot routes are not mounted (%s)", rec.Body)
	}
}

// embeddedRegistry starts an etcd for a serve-mode build.
func embeddedRegistry(t *testing.T) registry.Registry {
	t.Helper()
	return etcdtest.Registry(t)
}

// registerGuildNode registers the node serving h as the ring's only
// guild node and waits until the process's guild ring shows it.
func registerGuildNode(t *testing.T, w *roleWorld, h http.Handler) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ring, err := wiring.Ring(ctx, w.parts.Seams, w.parts.Registry, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	changes := ring.Changes(ctx)
	addr := strings.TrimPrefix(srv.URL, "http://")
	r, err := w.parts.Registry.Register(ctx, registry.Node{Name: "n1", Roles: []string{registry.RoleGuild}, Addr: addr, HTTPAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	for {
		if _, ok := ring.Node("n1"); ok {
			return
		}
		if _, ok := <-changes; !ok {
			t.Fatal("the guild ring never showed the node")
		}
	}
}

// In `concord serve` a node running api and guild serves the public
// endpoint as the proxy to the guild owners, GET /gateway/bot itself, and
// the guild's REST surface for the requests forwarded to it: a request
// crosses the proxy, comes back forwarded and is served by the core API
// behind the owner check.
func TestServeBuildsAPIRole(t *testing.T) {
	w := newRoleWorld(t, embeddedRegistry(t), registry.RoleAPI, registry.RoleGuild)
	w.build(t, func(string) bool { return true })
	rest, ok := wiring.Lookup(w.parts.Seams, wiring.REST)
	if !ok {
		t.Fatal("no REST handler provided")
	}
	if _, ok := wiring.Lookup(w.parts.Seams, wiring.Leases); ok {
		t.Fatal("a serve node provides the bot platform's lease manager; gateway nodes run their own")
	}
	if _, ok := wiring.Lookup(w.parts.Seams, Counters); !ok {
		t.Fatal("the api role provided no counters")
	}
	registerGuildNode(t, w, w.mux)
	rec, me := w.get(t, w.mux, "/api/v10/users/@me")
	if rec.Code != http.StatusOK || me["username"] != "alice" {
		t.Fatalf("GET /users/@me through the proxy = %d %v", rec.Code, me)
	}
	rec, gb := w.get(t, rest, "/api/v10/gateway/bot")
	if rec.Code != http.StatusOK || gb["session_start_limit"] == nil {
		t.Fatalf("GET /gateway/bot = %d %v", rec.Code, gb)
	}
}

// A serve node running the guild role without the api role serves its
// guilds' REST on /api/ itself, behind the owner check: a guild the ring
// places elsewhere is answered 503 with the not-owner mark, unprocessed.
func TestServeGuildOnlyServesItsREST(t *testing.T) {
	w := newRoleWorld(t, embeddedRegistry(t), registry.RoleGuild)
	w.build(t, func(name string) bool { return name == registry.RoleGuild })
	if _, ok := wiring.Lookup(w.parts.Seams, Counters); ok {
		t.Fatal("the api role was built on a guild-only node")
	}
	rest, ok := wiring.Lookup(w.parts.Seams, wiring.REST)
	if !ok {
		t.Fatal("a guild-only node mounted no REST")
	}
	// No guild node on the ring yet: every guild is someone else's.
	rec, _ := w.get(t, rest, "/api/v10/guilds/12345")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(notOwnerHeader) != "n1" {
		t.Fatalf("GET another node's guild = %d (not-owner %q), want 503 marked", rec.Code, rec.Header().Get(notOwnerHeader))
	}
	registerGuildNode(t, w, w.mux)
	rec, me := w.get(t, w.mux, "/api/v10/users/@me")
	if rec.Code != http.StatusOK || me["username"] != "alice" {
		t.Fatalf("GET /users/@me = %d %v", rec.Code, me)
	}
}
