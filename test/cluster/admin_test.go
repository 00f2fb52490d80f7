//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// adminTestToken is the admin token of the tests' nodes (nodeArgs).
const adminTestToken = "cluster-test-admin-token"

// adminGet GETs an admin path with the admin token and decodes a 200
// answer into out.
func adminGet(t *testing.T, addr, path string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminTestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("GET %s%s: decode %s: %v", addr, path, raw, err)
		}
	}
	return resp.StatusCode, string(raw)
}

// TestAdminGuilds runs a guild node and a gateway+api node as the operator
// does (--admin listeners, --cluster, no --worker: each claims its own
// snowflake pair) and checks GET /admin/guilds: the guild node reports its
// loaded guild with the online session and a non-zero event age after
// traffic, on the admin listener and not on --http; the api node answers
// for the cluster, as kubectl-concord asks it.
func TestAdminGuilds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "adm")
	common := env.nodeArgs(
		"--cluster=adm-test",
	)
	guildAdmin, appAdmin := freeAddr(t), freeAddr(t)
	gn := startRole(t, "guild-1", "guild", common, "--admin="+guildAdmin)
	app := startRole(t, "app-1", "gateway,api", common, "--admin="+appAdmin)
	deadline := time.Now().Add(30 * time.Second)
	gn.waitReady(t, deadline)
	app.waitReady(t, deadline)

	// Both nodes claimed a snowflake pair of their own and publish their
	// admin address.
	reg := env.registry(t)
	labels := map[string]map[string]string{}
	for _, role := range []string{registry.RoleGuild, registry.RoleGateway} {
		ch, err := reg.Watch(ctx, role)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range (<-ch).Nodes {
			labels[n.Name] = n.Labels
		}
	}
	if a, b := labels["guild-1"]["concord.dev/snowflake"], labels["app-1"]["concord.dev/snowflake"]; a == "" || a == b {
		t.Fatalf("snowflake pairs guild-1 %q, app-1 %q: want two different claimed pairs", a, b)
	}
	if got := labels["guild-1"]["concord.dev/admin"]; got != guildAdmin {
		t.Fatalf("guild-1 admin label = %q, want %s", got, guildAdmin)
	}
	if got := labels["guild-1"]["concord.dev/cluster"]; got != "adm-test" {
		t.Fatalf("guild-1 cluster label = %q", got)
	}

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	token := register(t, api, "adm")
	guildID := createGuild(t, api, token, "admin stats")
	channel := firstChannel(t, api, token, guildID)
	s := dial(t, "adm-session", app.http, token)
	s.await(t, "GUILD_CREATE", 10*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) == 1 })
	for i := range 5 {
		api.must(t, token, "POST", "/channels/"+channel+"/messages", map[string]any{"content": fmt.Sprintf("m%d", i)}, nil)
	}
	s.await(t, "5 MESSAGE_CREATE", 10*time.Second, func(fs []dispatch) bool { return len(messages(fs)) == 5 })

	// The guild node, on its admin listener.
	var samples []fleet.GuildSample
	if code, body := adminGet(t, guildAdmin, "/admin/guilds", &samples); code != http.StatusOK {
		t.Fatalf("guild node GET /admin/guilds on --admin = %d %s", code, body)
	}
	var mine *fleet.GuildSample
	for i := range samples {
		if samples[i].GuildID == guildID {
			mine = &samples[i]
		}
	}
	if mine == nil || mine.Node != "guild-1" || mine.Online != 1 || mine.Members != 1 || mine.EventAgeP99 <= 0 || mine.EventAgeP50 <= 0 {
		t.Fatalf("guild node samples = %+v, want guild %s on guild-1 with 1 online, 1 member and non-zero event ages", samples, guildID)
	}
	var one fleet.GuildSample
	if code, body := adminGet(t, guildAdmin, "/admin/guilds/"+guildID, &one); code != http.StatusOK || one.GuildID != guildID || one.Online != 1 {
		t.Fatalf("guild node GET /admin/guilds/%s = %d %s", guildID, code, body)
	}
	if code, body := adminGet(t, guildAdmin, "/admin/guilds/1", nil); code != http.StatusNotFound || !strings.Contains(body, "10004") {
		t.Fatalf("guild node GET of a guild it has not loaded = %d %s, want 404 10004", code, body)
	}
	// Not on the public listener.
	if code, body := adminGet(t, gn.http, "/admin/guilds", nil); code == http.StatusOK {
		t.Fatalf("guild node answered /admin/guilds on --http: %s", body)
	}

	// The api node answers for the cluster (kubectl-concord's path).
	var all []fleet.GuildSample
	if code, body := adminGet(t, appAdmin, "/admin/guilds", &all); code != http.StatusOK {
		t.Fatalf("api node GET /admin/guilds = %d %s", code, body)
	}
	found := false
	for _, x := range all {
		found = found || (x.GuildID == guildID && x.Node == "guild-1" && x.Online == 1)
	}
	if !found {
		t.Fatalf("api node samples = %+v, want guild %s from guild-1", all, guildID)
	}
	if code, body := adminGet(t, appAdmin, "/admin/guilds/"+guildID, &one); code != http.StatusOK || one.Node != "guild-1" {
		t.Fatalf("api node GET /admin/guilds/%s = %d %s", guildID, code, body)
	}
	if code, body := adminGet(t, app.http, "/admin/guilds", nil); code == http.StatusOK {
		t.Fatalf("api node answered /admin/guilds on --http: %s", body)
	}

	// /metrics on the admin listener names the cluster.
	if code, body := adminGet(t, guildAdmin, "/metrics", nil); code != http.StatusOK || !strings.Contains(body, `concord_cluster_node_info{`) ||
		!strings.Contains(body, `cluster="adm-test"`) {
		t.Fatalf("guild node /metrics on --admin = %d, want concord_cluster_node_info with cluster=\"adm-test\"", code)
	}
}

// awaitSamples polls addr's /admin/guilds until ok accepts the samples.
func awaitSamples(t *testing.T, addr, what string, ok func([]fleet.GuildSample) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var samples []fleet.GuildSample
		code, body := adminGet(t, addr, "/admin/guilds", &samples)
		if code == http.StatusOK && ok(samples) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /admin/guilds on %s = %d %s", what, addr, code, body)
		}
		time.Sleep(100 * time.Millisecond) // polling a snapshot: no event to await
	}
}

func hasGuild(samples []fleet.GuildSample, id string, online int64) bool {
	for _, s := range samples {
		if s.GuildID == id && (online < 0 || s.Online == online) {
			return true
		}
	}
	return false
}

// TestDedicatedGuildNode runs a GuildPlacement's node as the operator
// does (--guild-dedicated): it takes no guild from the ring, and once the
// guild is pinned to it (what the operator does when the pod is ready)
// the guild moves there with its session, and new guilds still go to the
// shared guild node.
func TestDedicatedGuildNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "ded")
	common := env.nodeArgs()
	sharedAdmin := freeAddr(t)
	shared := startRole(t, "guild-1", "guild", common, "--admin="+sharedAdmin)
	app := startRole(t, "app-1", "gateway,api", common)
	deadline := time.Now().Add(30 * time.Second)
	shared.waitReady(t, deadline)
	app.waitReady(t, deadline)

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	token := register(t, api, "ded")
	guildID := createGuild(t, api, token, "big guild")
	s := dial(t, "ded-session", app.http, token)
	s.await(t, "GUILD_CREATE", 10*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) == 1 })
	awaitSamples(t, sharedAdmin, "the guild on the shared node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, guildID, 1) })

	// The dedicated node joins: the ring does not give it the guild.
	dedAdmin := freeAddr(t)
	ded := startRole(t, "prod-guild-"+guildID, "guild", common, "--admin="+dedAdmin, "--guild-dedicated="+guildID)
	ded.waitReady(t, time.Now().Add(30*time.Second))
	other := createGuild(t, api, token, "small guild")
	firstChannel(t, api, token, other)
	awaitSamples(t, sharedAdmin, "the new guild on the shared node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, other, -1) })
	var onDed []fleet.GuildSample
	if code, body := adminGet(t, dedAdmin, "/admin/guilds", &onDed); code != http.StatusOK || len(onDed) != 0 {
		t.Fatalf("dedicated node before the pin: /admin/guilds = %d %s, want no guild", code, body)
	}

	// The operator pins the guild to the dedicated pod: it moves there
	// with its session, and messages flow through it.
	reg := env.registry(t)
	if err := reg.Pin(ctx, mustID(t, guildID), ded.name); err != nil {
		t.Fatal(err)
	}
	awaitSamples(t, dedAdmin, "the pinned guild on the dedicated node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, guildID, 1) })
	awaitSamples(t, sharedAdmin, "the pinned guild gone from the shared node", func(ss []fleet.GuildSample) bool { return !hasGuild(ss, guildID, -1) })
	channel := firstChannel(t, api, token, guildID)
	var m struct {
		ID string `json:"id"`
	}
	api.must(t, token, "POST", "/channels/"+channel+"/messages", map[string]any{"content": "on the dedicated node"}, &m)
	s.await(t, "MESSAGE_CREATE through the dedicated node", 10*time.Second, func(fs []dispatch) bool {
		for _, msg := range messages(fs) {
			if msg.ID == m.ID {
				return true
			}
		}
		return false
	})
	awaitSamples(t, sharedAdmin, "the other guild still on the shared node", func(ss []fleet.GuildSample) bool { return hasGuild(ss, other, -1) })
}
