//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSessionDirectory runs two gateway nodes, one api+guild node and a
// read-state node (Kafka, Cassandra, the test's etcd) as real processes,
// and gives each of two users a session on each gateway node. Events
// aimed at a user rather than a guild must reach every session of that
// user on both gateway nodes: GUILD_CREATE (and the guild's messages)
// after joining mid-session, DMs and group DMs, MESSAGE_ACK, a role
// change, and GUILD_DELETE after leaving. Every session's READY comes
// first and its sequence has no gap. Last, a bot's session on a gateway
// node ends (4004) when its token is reset elsewhere: the node holds the
// bot's entitlement lease and hears the revocation.
func TestSessionDirectory(t *testing.T) {
	kafka := kafkaAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "dir")
	common := env.nodeArgs(kafkaEventlog(kafka, env.ks), "--log-level=info")
	app := startRole(t, "app-1", "api,guild", common, workerFlag(1))
	gw1 := startRole(t, "gw-1", "gateway", common, workerFlag(2))
	gw2 := startRole(t, "gw-2", "gateway", common, workerFlag(3))
	rs := startRole(t, "rs-1", "readstate", common, workerFlag(4))
	deadline := time.Now().Add(45 * time.Second)
	for _, p := range []*proc{app, gw1, gw2, rs} {
		p.waitReady(t, deadline)
	}

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	alice, bob, carol := newUser(t, api, "alice"), newUser(t, api, "bob"), newUser(t, api, "carol")
	guildID, channelID := newGuild(t, api, alice.token, "directory")
	invite := newInvite(t, api, alice.token, channelID)
	join(t, api, carol, invite)

	// GUILDS, GUILD_MEMBERS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT.
	const intents = 1<<0 | 1<<1 | 1<<9 | 1<<12 | 1<<15
	type sess struct {
		*wsSession
		who string
	}
	open := func(u clusterUser, who string) []sess {
		var out []sess
		for i, gw := range []*proc{gw1, gw2} {
			s := dialIntents(t, fmt.Sprintf("%s@gw-%d", who, i+1), gw.http, u.token, intents)
			s.await(t, "READY", 15*time.Second, func(f []dispatch) bool { return len(f) > 0 })
			if f := s.snapshot()[0]; f.Type != "READY" || f.Seq != 1 {
				t.Fatalf("%s: first dispatch %s seq %d, want READY seq 1", s.name, f.Type, f.Seq)
			}
			out = append(out, sess{s, who})
		}
		return out
	}
	aliceS, bobS := open(alice, "alice"), open(bob, "bob")
	all := append(append([]sess{}, aliceS...), bobS...)

	// awaitEvent waits on each session for a dispatch typ whose d
	// satisfies match.
	awaitEvent := func(ss []sess, typ, what string, match func(d json.RawMessage) bool) {
		t.Helper()
		for _, s := range ss {
			s.await(t, what, 15*time.Second, func(frames []dispatch) bool {
				for _, f := range frames {
					if f.Type == typ && match(f.D) {
						return true
					}
				}
				return false
			})
		}
	}
	field := func(d json.RawMessage, key string) string {
		var m map[string]any
		_ = json.Unmarshal(d, &m)
		v, _ := m[key].(string)
		return v
	}
	byID := func(key, id string) func(json.RawMessage) bool {
		return func(d json.RawMessage) bool { return field(d, key) == id }
	}

	// Joining mid-session: bob's sessions on both gateway nodes get the
	// guild and then its messages.
	join(t, api, bob, invite)
	awaitEvent(bobS, "GUILD_CREATE", "GUILD_CREATE of the joined guild", byID("id", guildID))
	var m struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": "welcome bob"}, &m)
	awaitEvent(all, "MESSAGE_CREATE", "the guild message", byID("id", m.ID))

	// A DM reaches both users' sessions on both nodes.
	var dm struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/users/@me/channels", map[string]any{"recipient_id": bob.id}, &dm)
	var dmMsg struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/channels/"+dm.ID+"/messages", map[string]any{"content": "psst"}, &dmMsg)
	awaitEvent(all, "MESSAGE_CREATE", "the DM", byID("id", dmMsg.ID))

	// A group DM, created by carol (who has no session): its
	// CHANNEL_CREATE and messages reach alice's and bob's sessions.
	var gdm struct {
		ID string `json:"id"`
	}
	api.must(t, carol.token, "POST", "/users/@me/channels", map[string]any{"recipients": []string{alice.id, bob.id}}, &gdm)
	awaitEvent(all, "CHANNEL_CREATE", "the group DM's CHANNEL_CREATE", byID("id", gdm.ID))
	var gdmMsg struct {
		ID string `json:"id"`
	}
	api.must(t, carol.token, "POST", "/channels/"+gdm.ID+"/messages", map[string]any{"content": "hi both"}, &gdmMsg)
	awaitEvent(all, "MESSAGE_CREATE", "the group DM message", byID("id", gdmMsg.ID))

	// An ack by bob reaches both of his sessions.
	api.must(t, bob.token, "POST", "/channels/"+channelID+"/messages/"+m.ID+"/ack", map[string]any{}, nil)
	awaitEvent(bobS, "MESSAGE_ACK", "MESSAGE_ACK", byID("message_id", m.ID))

	// A role given to bob: GUILD_MEMBER_UPDATE on both of his sessions.
	var role struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/guilds/"+guildID+"/roles", map[string]any{"name": "friends"}, &role)
	api.must(t, alice.token, "PUT", "/guilds/"+guildID+"/members/"+bob.id+"/roles/"+role.ID, nil, nil)
	awaitEvent(bobS, "GUILD_MEMBER_UPDATE", "GUILD_MEMBER_UPDATE with the role", func(d json.RawMessage) bool {
		var u struct {
			Roles []string `json:"roles"`
			User  struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		return json.Unmarshal(d, &u) == nil && u.User.ID == bob.id && strings.Contains(strings.Join(u.Roles, ","), role.ID)
	})

	// Leaving: GUILD_DELETE on both of bob's sessions, and the guild's
	// messages stop reaching them.
	api.must(t, bob.token, "DELETE", "/users/@me/guilds/"+guildID, nil, nil)
	awaitEvent(bobS, "GUILD_DELETE", "GUILD_DELETE", byID("id", guildID))
	var after struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": "bye bob"}, &after)
	awaitEvent(aliceS, "MESSAGE_CREATE", "the message after bob left", byID("id", after.ID))
	for _, s := range bobS {
		for _, f := range s.snapshot() {
			if f.Type == "MESSAGE_CREATE" && field(f.D, "id") == after.ID {
				t.Fatalf("%s got a message of a guild it left", s.name)
			}
		}
	}
	for _, s := range all {
		if err := checkSeq(s.snapshot()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}

	// A bot's lease on a gateway node: resetting its token (on the
	// api+guild node) closes its session on gw-2 with 4004, pushed
	// through the registry to that node's lease manager.
	var application struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	api.must(t, alice.token, "POST", "/applications", map[string]any{"name": "leased"}, &application)
	bot := dialIntents(t, "bot@gw-2", gw2.http, "Bot "+application.Token, 1<<0)
	bot.await(t, "the bot's READY", 15*time.Second, func(f []dispatch) bool { return len(f) > 0 && f[0].Type == "READY" })
	api.must(t, alice.token, "POST", "/applications/"+application.ID+"/bot/reset", nil, nil)
	select {
	case <-bot.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the bot's session is still open 15 s after its token was reset")
	}
	if code := bot.CloseCode(); code != 4004 {
		t.Fatalf("bot session ended with close %d, want 4004", code)
	}
}
