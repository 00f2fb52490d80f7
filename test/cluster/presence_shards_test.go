//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestPresenceShards runs two presence replicas (presence-1 and
// presence-2) and one gateway, api and guild node with --presence. Alice
// and Erin hash to presence-1, Dave to presence-2: a guild member (Bob)
// sees each one's status, and each replica holds exactly its users'
// sessions. After kill -9 of presence-1, Alice's op 3 and Erin's logout,
// which presence-1 cannot take, still reach Bob through presence-2 once
// the ring moves them; restarting presence-1 moves its users back
// (presence-2 forgets them silently) and a new change is seen again.
func TestPresenceShards(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "psh")
	common := env.nodeArgs("--presence-window=200ms", "--presence-report-interval=1s", "--log-level=info")
	names := []string{"presence-1", "presence-2"}
	startPS := restartableRole(t, "presence", common)
	ps := map[string]*proc{"presence-1": startPS("presence-1", 1), "presence-2": startPS("presence-2", 2)}
	app := startRole(t, "app-1", "gateway,api,guild", common, "--presence", workerFlag(3))
	deadline := time.Now().Add(45 * time.Second)
	for _, p := range ps {
		p.waitReady(t, deadline)
	}
	app.waitReady(t, deadline)
	t.Logf("cluster: 3 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	owned := usersOn(t, api, "member", names, names)
	alice, dave := owned[0], owned[1]
	erin := usersOn(t, api, "erin", names, names[:1])[0]
	bob := usersOn(t, api, "bob", names, names[:1])[0]
	var g, ch struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/guilds", map[string]any{"name": "presence shards"}, &g)
	api.must(t, alice.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "general", "type": 0}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	api.must(t, alice.token, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	for _, u := range []clusterUser{bob, dave, erin} {
		api.must(t, u.token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	}
	guildCreate := func(frames []dispatch) bool { return len(guildCreates(frames, g.ID)) > 0 }
	status := func(s string) map[string]any {
		return map[string]any{"status": s, "since": nil, "activities": []any{}, "afk": false}
	}
	inGuild := func(want string) func(presenceUpdate) bool {
		return func(p presenceUpdate) bool { return p.GuildID == g.ID && p.Status == want }
	}

	// Bob watches the guild; Alice, Dave and Erin come online.
	bobS := dial(t, "bob", app.http, bob.token)
	bobS.await(t, "bob GUILD_CREATE", 15*time.Second, guildCreate)
	aliceS := dialClient(t, "alice", app.http, alice.token, "linux", status("online"))
	daveS := dialClient(t, "dave", app.http, dave.token, "linux", status("idle"))
	aliceS.await(t, "alice GUILD_CREATE", 15*time.Second, guildCreate)
	daveS.await(t, "dave GUILD_CREATE", 15*time.Second, guildCreate)
	erinS := dialClient(t, "erin", app.http, erin.token, "linux", status("online"))
	erinS.await(t, "erin GUILD_CREATE", 15*time.Second, guildCreate)
	awaitPresence(t, bobS, "alice online (presence-1)", alice.id, 0, 20*time.Second, inGuild("online"))
	awaitPresence(t, bobS, "dave idle (presence-2)", dave.id, 0, 20*time.Second, inGuild("idle"))
	awaitPresence(t, bobS, "erin online (presence-1)", erin.id, 0, 20*time.Second, inGuild("online"))

	// Each replica holds exactly the sessions of its users: alice, erin
	// and bob on presence-1 (they were chosen so), dave on presence-2.
	awaitSessions := func(what string, want map[string]float64) {
		t.Helper()
		end := time.Now().Add(30 * time.Second)
		for {
			got := map[string]float64{}
			ok := true
			for name, n := range want {
				got[name] = metricSum(t, ps[name].http, "concord_presence_sessions")
				ok = ok && got[name] == n
			}
			if ok {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s: sessions per replica %v, want %v", what, got, want)
			}
			time.Sleep(100 * time.Millisecond) // polling a gauge: no event to await
		}
	}
	awaitSessions("sharded sessions", map[string]float64{"presence-1": 3, "presence-2": 1})
	t.Logf("presence sharded over two replicas after %v", time.Since(start).Round(time.Millisecond))

	// kill -9 presence-1; Alice goes dnd and Erin logs out while it is
	// dead: presence-2 takes both over once the ring drops presence-1.
	ps["presence-1"].kill()
	killed := time.Now()
	skip := len(bobS.snapshot())
	aliceS.send(t, map[string]any{"op": 3, "d": status("dnd")})
	erinS.CloseNormally() // close 1000: the session ends, no resume
	awaitPresence(t, bobS, "alice dnd via presence-2", alice.id, skip, 60*time.Second, inGuild("dnd"))
	took := time.Since(killed)
	awaitPresence(t, bobS, "erin offline via presence-2", erin.id, skip, 60*time.Second, inGuild("offline"))
	t.Logf("presence-1 killed: alice's change seen through presence-2 after %v, erin's logout after %v",
		took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	awaitSessions("every session on the survivor", map[string]float64{"presence-2": 3})
	// Dave, on the survivor all along, still changes.
	skip = len(bobS.snapshot())
	daveS.send(t, map[string]any{"op": 3, "d": status("online")})
	awaitPresence(t, bobS, "dave online", dave.id, skip, 30*time.Second, inGuild("online"))

	// presence-1 comes back: its users move back (presence-2 forgets them
	// without a broadcast), and Alice's next change is seen.
	ps["presence-1"] = startPS("presence-1", 1)
	ps["presence-1"].waitReady(t, time.Now().Add(45*time.Second))
	awaitSessions("sessions moved back", map[string]float64{"presence-1": 2, "presence-2": 1})
	for _, f := range bobS.snapshot()[skip:] {
		var p presenceUpdate
		if f.Type == "PRESENCE_UPDATE" && json.Unmarshal(f.D, &p) == nil && p.User.ID == alice.id && p.Status != "dnd" {
			t.Fatalf("alice's status flapped to %q while ownership moved back", p.Status)
		}
	}
	skip = len(bobS.snapshot())
	aliceS.send(t, map[string]any{"op": 3, "d": status("idle")})
	awaitPresence(t, bobS, "alice idle after presence-1 is back", alice.id, skip, 30*time.Second, inGuild("idle"))
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
