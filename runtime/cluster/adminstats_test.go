package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/registry/etcd/etcdtest"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store/pebble"
)

// The runtime's GuildSample encodes exactly as the operator's
// fleet.GuildSample, which the operator and kubectl-concord decode.
func TestGuildSampleMatchesFleet(t *testing.T) {
	ours := GuildSample{GuildID: "42", Node: "guild-0", Pod: "guild-0", EventAgeP50: 3 * time.Millisecond,
		EventAgeP99: 250 * time.Millisecond, QueueLength: 7, Online: 11, Members: 13, VoiceCalls: 2}
	theirs := fleet.GuildSample{GuildID: "42", Node: "guild-0", Pod: "guild-0", EventAgeP50: 3 * time.Millisecond,
		EventAgeP99: 250 * time.Millisecond, QueueLength: 7, Online: 11, Members: 13, VoiceCalls: 2}
	a, err := json.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("encodings differ:\n runtime  %s\n operator %s", a, b)
	}
	// And without the optional pod, as guild nodes send it.
	ours.Pod, theirs.Pod = "", ""
	a, _ = json.Marshal(ours)
	b, _ = json.Marshal(theirs)
	if string(a) != string(b) {
		t.Fatalf("encodings without pod differ:\n runtime  %s\n operator %s", a, b)
	}
}

// statsGuildNode is a guild node's stats endpoints over a real guild
// service, with one guild loaded and one session attached.
type statsGuildNode struct {
	node  *Node
	srv   *httptest.Server
	guild snowflake.ID
}

func newStatsGuildNode(t *testing.T, name string, worker int) *statsGuildNode {
	t.Helper()
	ctx := context.Background()
	st, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ids, err := snowflake.New(snowflake.Config{Worker: worker})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := guild.NewService(guild.Config{}, guild.Deps{Store: st, Sink: discardSink{}, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	owner, _ := ids.Next()
	info, err := svc.CreateGuild(ctx, owner, "stats "+name)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AttachSession(ctx, info.Guild.ID, event.Session{ID: event.SessionID(name + "-s1"), UserID: owner, Node: "gw"}); err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{Node: name, Roles: []string{registry.RoleGuild}}, guilds: svc, log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	n.statsRoutes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &statsGuildNode{node: n, srv: srv, guild: info.Guild.ID}
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

func TestAdminGuildsOnGuildNode(t *testing.T) {
	g := newStatsGuildNode(t, "guild-0", 1)
	var all []fleet.GuildSample
	if code := getJSON(t, g.srv.URL+"/admin/guilds", &all); code != http.StatusOK {
		t.Fatalf("GET /admin/guilds = %d", code)
	}
	id := strconv.FormatUint(uint64(g.guild), 10)
	if len(all) != 1 || all[0].GuildID != id || all[0].Node != "guild-0" || all[0].Online != 1 || all[0].Members != 1 ||
		all[0].EventAgeP99 <= 0 || all[0].EventAgeP50 > all[0].EventAgeP99 || all[0].VoiceCalls != 0 {
		t.Fatalf("GET /admin/guilds = %+v, want guild %s on guild-0 with 1 online, 1 member, non-zero age", all, id)
	}
	var one fleet.GuildSample
	if code := getJSON(t, g.srv.URL+"/admin/guilds/"+id, &one); code != http.StatusOK || one.GuildID != id || one.Online != 1 {
		t.Fatalf("GET /admin/guilds/%s = %d %+v", id, code, one)
	}
	var e struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	}
	if code := getJSON(t, g.srv.URL+"/admin/guilds/12345", &e); code != http.StatusNotFound || e.Code != 10004 || e.Message != "Unknown Guild" {
		t.Fatalf("GET of a guild not loaded = %d %+v, want 404 code 10004", code, e)
	}
	if code := getJSON(t, g.srv.URL+"/admin/guilds/nope", &e); code != http.StatusNotFound {
		t.Fatalf("GET of a malformed id = %d, want 404", code)
	}
}

// An api node answers for the cluster: every guild node's guilds, and one
// guild from its owner on the ring; a guild node that does not answer is
// left out.
func TestAdminGuildsOnAPINode(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	g0, g1 := newStatsGuildNode(t, "guild-0", 1), newStatsGuildNode(t, "guild-1", 2)
	join := func(name, admin string) {
		f.Join(registry.Node{Name: name, Addr: "unused:1", HTTPAddr: "unused:2", Labels: map[string]string{labelAdmin: admin}})
	}
	join("guild-0", g0.srv.Listener.Addr().String())
	join("guild-1", g1.srv.Listener.Addr().String())
	join("guild-dead", "127.0.0.1:1")

	api := &Node{cfg: Config{Roles: []string{registry.RoleAPI}, CallTimeout: 5 * time.Second}, guildRng: f.Ring, log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	api.statsRoutes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var all []fleet.GuildSample
	if code := getJSON(t, srv.URL+"/admin/guilds", &all); code != http.StatusOK {
		t.Fatalf("GET /admin/guilds on the api node = %d", code)
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
	ctx := context.Background()
	pins := map[snowflake.ID]string{g0.guild: "guild-0", g1.guild: "guild-1", 7: "guild-0", 9: "guild-dead"}
	changes := f.Ring.Changes(ctx)
	for id, node := range pins {
		if err := f.Reg.Pin(ctx, id, node); err != nil {
			t.Fatal(err)
		}
	}
	for pinned := false; !pinned; {
		pinned = true
		for id, node := range pins {
			if o, _ := f.Ring.Owner(id); o.Name != node {
				pinned = false
			}
		}
		if !pinned {
			<-changes
		}
	}
	for _, g := range []*statsGuildNode{g0, g1} {
		id := strconv.FormatUint(uint64(g.guild), 10)
		var one fleet.GuildSample
		if code := getJSON(t, srv.URL+"/admin/guilds/"+id, &one); code != http.StatusOK || one.GuildID != id || one.Node != g.node.cfg.Node || one.Online != 1 {
			t.Fatalf("GET /admin/guilds/%s on the api node = %d %+v", id, code, one)
		}
	}
	var e struct {
		Code int `json:"code"`
	}
	if code := getJSON(t, srv.URL+"/admin/guilds/7", &e); code != http.StatusNotFound || e.Code != 10004 {
		t.Fatalf("GET of a guild its owner has not loaded = %d %+v, want 404 code 10004", code, e)
	}
	if code := getJSON(t, srv.URL+"/admin/guilds/9", &e); code != http.StatusBadGateway {
		t.Fatalf("GET of a guild whose owner does not answer = %d, want 502", code)
	}
}
