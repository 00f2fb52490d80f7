//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
)

// presenceUpdate is PRESENCE_UPDATE's `d`.
type presenceUpdate struct {
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	GuildID      string            `json:"guild_id"`
	Status       string            `json:"status"`
	ClientStatus map[string]string `json:"client_status"`
}

// awaitPresence waits until s received a PRESENCE_UPDATE for user that
// cond accepts, among the frames after the first skip.
func awaitPresence(t *testing.T, s *wsSession, what, user string, skip int, timeout time.Duration, cond func(presenceUpdate) bool) {
	t.Helper()
	s.await(t, what, timeout, func(frames []dispatch) bool {
		for _, f := range frames[min(skip, len(frames)):] {
			if f.Type != "PRESENCE_UPDATE" {
				continue
			}
			var p presenceUpdate
			if err := json.Unmarshal(f.D, &p); err == nil && p.User.ID == user && cond(p) {
				return true
			}
		}
		return false
	})
}

// dialClient is dial with IDENTIFY's os and presence chosen by the test
// (intents GUILDS, GUILD_PRESENCES, GUILD_MESSAGES, MESSAGE_CONTENT).
func dialClient(t *testing.T, name, gatewayAddr, token, os string, presence map[string]any) *wsSession {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(gatewayAddr), token,
		gwtest.Options{Name: name, Intents: 1<<0 | 1<<8 | 1<<9 | 1<<15, OS: os, Presence: presence})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &wsSession{Conn: c, name: name, gateway: gatewayAddr}
}

// TestPresenceNode runs a presence node (--roles=presence) and one node
// running gateway, api and guild with --presence, on a fresh Cassandra
// keyspace: a user's desktop (online) and mobile (idle) sessions reach
// another member as one PRESENCE_UPDATE; op 14 and op 8 are answered by
// the guild's owner; after kill -9 of the presence
// node messages still flow; a new presence node rebuilds every session
// from the gateway's re-reports, and a later status change is broadcast
// with the rebuilt sessions folded in.
func TestPresenceNode(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "pr")
	common := env.nodeArgs("--presence-window=200ms", "--presence-report-interval=500ms", "--log-level=info")
	startPresence := func(name string, worker int) (*proc, string) {
		addr := freeAddr(t)
		return startNode(t, name, addr, append([]string{"--roles=presence", "--grpc=" + freeAddr(t),
			workerFlag(worker), "--data-dir=" + t.TempDir()}, common...)...), addr
	}
	pres, _ := startPresence("presence-1", 1)
	app := startRole(t, "app-1", "gateway,api,guild", common, "--presence", workerFlag(2))
	deadline := time.Now().Add(30 * time.Second)
	pres.waitReady(t, deadline)
	app.waitReady(t, deadline)
	t.Logf("cluster: 2 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	alice, bob := newUser(t, api, "alice"), newUser(t, api, "bob")
	guildID, channelID := guildWithMembers(t, api, alice, "presence", bob)
	guildCreate := func(frames []dispatch) bool { return len(guildCreates(frames, guildID)) > 0 }

	// Bob watches; Alice comes online on desktop and idle on mobile.
	bobS := dial(t, "bob", app.http, bob.token)
	bobS.await(t, "bob GUILD_CREATE", 10*time.Second, guildCreate)
	desktop := dialClient(t, "alice-desktop", app.http, alice.token, "linux", map[string]any{"status": "online", "since": nil, "activities": []any{}, "afk": false})
	mobile := dialClient(t, "alice-mobile", app.http, alice.token, "android", map[string]any{"status": "idle", "since": nil, "activities": []any{}, "afk": false})
	desktop.await(t, "alice desktop GUILD_CREATE", 10*time.Second, guildCreate)
	mobile.await(t, "alice mobile GUILD_CREATE", 10*time.Second, guildCreate)
	awaitPresence(t, bobS, "alice online on desktop, idle on mobile", alice.id, 0, 10*time.Second, func(p presenceUpdate) bool {
		return p.GuildID == guildID && p.Status == "online" && p.ClientStatus["desktop"] == "online" && p.ClientStatus["mobile"] == "idle"
	})
	t.Logf("presence broadcast after %v", time.Since(start).Round(time.Millisecond))

	// Op 14 and op 8 reach the guild's owner (GuildNode.LazyRequest and RequestMembers): the
	// member list and the member chunk come back, Alice in them.
	bobS.send(t, map[string]any{"op": 14, "d": map[string]any{"guild_id": guildID, "typing": true, "channels": map[string]any{channelID: [][]int{{0, 99}}}}})
	bobS.send(t, map[string]any{"op": 8, "d": map[string]any{"guild_id": guildID, "query": "", "limit": 0, "presences": true, "nonce": "n1"}})
	for _, typ := range []string{"GUILD_MEMBER_LIST_UPDATE", "GUILD_MEMBERS_CHUNK"} {
		bobS.await(t, typ, 10*time.Second, func(frames []dispatch) bool {
			for _, f := range frames {
				if f.Type == typ && strings.Contains(string(f.D), `"id":"`+alice.id+`"`) {
					return true
				}
			}
			return false
		})
	}

	// kill -9 the presence node: messages still flow.
	pres.kill()
	var m struct {
		ID string `json:"id"`
	}
	api.must(t, bob.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": "still here"}, &m)
	desktop.await(t, "MESSAGE_CREATE without a presence node", 10*time.Second, func(frames []dispatch) bool {
		for _, msg := range messages(frames) {
			if msg.ID == m.ID {
				return true
			}
		}
		return false
	})
	t.Logf("message delivered without a presence node after %v", time.Since(start).Round(time.Millisecond))

	// A new presence node rebuilds from the gateway's re-reports: it
	// knows all three sessions without any client doing anything.
	pres2, pres2HTTP := startPresence("presence-2", 3)
	pres2.waitReady(t, time.Now().Add(20*time.Second))
	rebuilt := time.Now().Add(15 * time.Second)
	for metricSum(t, pres2HTTP, "concord_presence_sessions") < 3 {
		if time.Now().After(rebuilt) {
			t.Fatalf("new presence node knows %v sessions after 15s, want 3", metricSum(t, pres2HTTP, "concord_presence_sessions"))
		}
		select {
		case <-pres2.done:
			t.Fatalf("presence node exited:\n%s", pres2.output())
		case <-time.After(100 * time.Millisecond): // polling a gauge: no event to await
		}
	}
	t.Logf("presence rebuilt after %v", time.Since(start).Round(time.Millisecond))

	// A later change is broadcast, folded with the rebuilt desktop
	// session: the newest explicit status (dnd) applies to every platform,
	// and client_status names desktop only if the node knows that session
	// (the mobile session's op 3 alone would not carry it).
	skip := len(bobS.snapshot())
	mobile.send(t, map[string]any{"op": 3, "d": map[string]any{"status": "dnd", "since": nil, "activities": []any{}, "afk": false}})
	awaitPresence(t, bobS, "alice dnd after the restart", alice.id, skip, 15*time.Second, func(p presenceUpdate) bool {
		return p.GuildID == guildID && p.Status == "dnd" && p.ClientStatus["desktop"] == "dnd" && p.ClientStatus["mobile"] == "dnd"
	})
	t.Logf("change after restart broadcast after %v", time.Since(start).Round(time.Millisecond))
}
