package apirole

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/guildrole"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/runtime/services/wiring/wiringtest"
)

// statsGuildNode is the admin endpoints of a process running the guild
// role, with one guild loaded and one session attached.
type statsGuildNode struct {
	name  string
	srv   *httptest.Server
	guild snowflake.ID
}

func newStatsGuildNode(t *testing.T, name string, worker int) *statsGuildNode {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Node, cfg.Worker = name, worker
	seams := &wiring.Seams{}
	wiring.Provide[event.Sink](seams, wiring.Sink, discardSink{})
	parts := wiringtest.Parts(t, seams, cfg)
	admin := http.NewServeMux()
	parts.Admin = admin
	if err := wiring.Build(ctx, []wiring.Role{guildrole.Role}, func(string) bool { return true }, parts, http.NewServeMux(), &lifecycle.Group{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seams.Close() })
	svc, _ := wiring.Lookup(seams, wiring.GuildService)
	owner := wiringtest.User(t, parts, "owner").ID
	info, err := svc.CreateGuild(ctx, owner, "stats "+name)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AttachSession(ctx, info.Guild.ID, event.Session{ID: event.SessionID(name + "-s1"), UserID: owner, Node: "gw"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin)
	t.Cleanup(srv.Close)
	return &statsGuildNode{name: name, srv: srv, guild: info.Guild.ID}
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
	return resp.StatusCode
}

// An api node of `concord serve` without the guild role answers the
// guild statistics for the cluster: every guild node's guilds, and one
// guild from its owner on the ring; a guild node that does not answer is
// left out, and a guild whose owner does not answer is a 502.
func TestServeAPIAnswersClusterGuildStats(t *testing.T) {
	reg := embeddedRegistry(t)
	w := newRoleWorld(t, reg, registry.RoleAPI)
	admin := http.NewServeMux()
	w.parts.Admin = admin
	w.build(t, func(name string) bool { return name == Name })
	srv := httptest.NewServer(admin)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ring, err := wiring.Ring(ctx, w.parts.Seams, reg, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// waitRing waits until ok reports the api node's ring is as wanted.
	waitRing := func(ok func() bool) {
		t.Helper()
		changes := ring.Changes(ctx)
		for !ok() {
			if _, open := <-changes; !open {
				t.Fatal("the api node's guild ring never showed the change")
			}
		}
	}
	g0, g1 := newStatsGuildNode(t, "guild-0", 1), newStatsGuildNode(t, "guild-1", 2)
	join := func(name, admin string) {
		r, err := reg.Register(ctx, registry.Node{Name: name, Roles: []string{registry.RoleGuild}, Addr: "unused:1", HTTPAddr: "unused:2",
			Labels: map[string]string{adminapi.LabelAdmin: admin}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
	}
	join("guild-0", g0.srv.Listener.Addr().String())
	join("guild-1", g1.srv.Listener.Addr().String())
	join("guild-dead", closedAddr(t))
	waitRing(func() bool { return len(ring.View().Nodes()) == 3 })

	var all []adminapi.GuildSample
	if code := getJSON(t, srv.URL+guildrole.StatsPath, &all); code != http.StatusOK {
		t.Fatalf("GET %s on the api node = %d", guildrole.StatsPath, code)
	}
	nodes := map[string]string{}
	for _, s := range all {
		nodes[s.GuildID] = s.Node
	}
	id0, id1 := strconv.FormatUint(uint64(g0.guild), 10), strconv.FormatUint(uint64(g1.guild), 10)
	if len(all) != 2 || nodes[id0] != "guild-0" || nodes[id1] != "guild-1" {
		t.Fatalf("cluster samples = %+v, want %s on guild-0 and %s on guild-1", all, id0, id1)
	}
	// One guild: asked of its owner on the ring. Pins make the owners
	// known: each guild on its node, guild 7 on guild-0 (not loaded
	// there) and guild 9 on the dead node.
	pins := map[snowflake.ID]string{g0.guild: "guild-0", g1.guild: "guild-1", 7: "guild-0", 9: "guild-dead"}
	for id, node := range pins {
		if err := reg.Pin(ctx, id, node); err != nil {
			t.Fatal(err)
		}
	}
	waitRing(func() bool {
		for id, node := range pins {
			if o, _ := ring.Owner(id); o.Name != node {
				return false
			}
		}
		return true
	})
	for _, g := range []*statsGuildNode{g0, g1} {
		id := strconv.FormatUint(uint64(g.guild), 10)
		var one adminapi.GuildSample
		if code := getJSON(t, srv.URL+guildrole.StatsPath+"/"+id, &one); code != http.StatusOK || one.GuildID != id || one.Node != g.name || one.Online != 1 {
			t.Fatalf("GET %s/%s on the api node = %d %+v", guildrole.StatsPath, id, code, one)
		}
	}
	var e struct {
		Code int `json:"code"`
	}
	if code := getJSON(t, srv.URL+guildrole.StatsPath+"/7", &e); code != http.StatusNotFound || e.Code != 10004 {
		t.Fatalf("GET of a guild its owner has not loaded = %d %+v, want 404 code 10004", code, e)
	}
	if code := getJSON(t, srv.URL+guildrole.StatsPath+"/9", &e); code != http.StatusBadGateway {
		t.Fatalf("GET of a guild whose owner does not answer = %d, want 502", code)
	}
}

// A node running the guild role answers the statistics of its own
// guilds: the api role on it adds no cluster-wide answer.
func TestServeAPIWithGuildLeavesStatsToGuildRole(t *testing.T) {
	w := newRoleWorld(t, embeddedRegistry(t), registry.RoleAPI, registry.RoleGuild)
	admin := http.NewServeMux()
	w.parts.Admin = admin
	w.build(t, func(name string) bool { return name == Name || name == registry.RoleGuild })
	if _, pattern := admin.Handler(httptest.NewRequest(http.MethodGet, guildrole.StatsPath, nil)); pattern != "" {
		t.Fatalf("the api role on a guild node serves %q", pattern)
	}
}
