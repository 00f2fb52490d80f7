//go:build e2e

package kube

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/resttest"
)

// jsDir is where hack/test-deps.sh installed discord.js (npm ci of
// test/conformance/js); the bots' scripts are this checkout's.
func jsDir(t *testing.T) (modules, scripts string) {
	t.Helper()
	dir := os.Getenv("CONCORD_JS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_JS_DIR is unset: source ~/.cache/concord/test-env.sh (make test-deps installs discord.js)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "discord.js")); err != nil {
		t.Fatalf("discord.js is not installed in %s (make test-deps): %v", dir, err)
	}
	scripts, err := filepath.Abs(filepath.Join("..", "conformance", "js"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "node_modules"), scripts
}

// TestDiscordJSBot runs the unmodified discord.js bot of the conformance
// suite (test/conformance/js/bot.js) against the platform on the node:
// REST through the api Service, its gateway session through the
// GatewayPool's Service. It logs in as its bot user with the guild in its
// cache, and answers "ping" with a reply to that message, which it then
// edits and deletes; the owner's history no longer has the reply.
func TestDiscordJSBot(t *testing.T) {
	modules, scripts := jsDir(t)
	w := newWorld(t, "djs")
	a := newBot(t, w, "djs")
	events := startBot(t, scripts, []string{"node", "bot.js"},
		[]string{"NODE_PATH=" + modules, "CONCORD_API=http://" + router + "/api", "CONCORD_TOKEN=" + a.token})
	ready := await(t, events, "ready", func(e botEvent) bool { return e.Ev == "ready" })
	if ready.User != a.id {
		t.Fatalf("ready as %s, want the bot user %s", ready.User, a.id)
	}
	cached := false
	for _, g := range ready.Guilds {
		for _, c := range g.Channels {
			cached = cached || (g.ID == w.guild && c == w.channel)
		}
	}
	if !cached {
		t.Fatalf("discord.js cache after ready lacks guild %s channel %s: %+v", w.guild, w.channel, ready.Guilds)
	}
	ping := post(t, w.owner, w.channel, "ping")
	replied := await(t, events, "the reply", func(e botEvent) bool { return e.Ev == "replied" })
	if replied.Reference != ping {
		t.Fatalf("reply references %q, want the ping %s", replied.Reference, ping)
	}
	await(t, events, "the edit", func(e botEvent) bool { return e.Ev == "edited" && e.Content == "pong (edited)" })
	await(t, events, "the delete", func(e botEvent) bool { return e.Ev == "deleted" })
	var history []struct{ ID string }
	resttest.Call(t, router, w.owner, "GET", "/channels/"+w.channel+"/messages?limit=10", nil, &history)
	for _, m := range history {
		if m.ID == replied.ID {
			t.Fatalf("deleted reply %s still in history", replied.ID)
		}
	}
}

// TestDiscordJSSlashCommands runs the unmodified discord.js application
// bot of the conformance suite (test/conformance/js/interactions.js): it
// registers two guild slash commands through REST; a member invokes /ping
// (POST /interactions, through the api Service) and reads the bot's reply
// in the channel's history within Discord's 3 s acknowledgement window;
// then /slow, which the bot defers, edits and follows up.
func TestDiscordJSSlashCommands(t *testing.T) {
	modules, scripts := jsDir(t)
	w := newWorld(t, "slash")
	a := newBot(t, w, "slash")
	events := startBot(t, scripts, []string{"node", "interactions.js"},
		[]string{"NODE_PATH=" + modules, "CONCORD_API=http://" + router + "/api", "CONCORD_TOKEN=" + a.token, "CONCORD_GUILD=" + w.guild})
	ready := await(t, events, "ready", func(e botEvent) bool { return e.Ev == "ready" })
	if ready.User != a.id || ready.Application != a.id {
		t.Fatalf("ready as user %s application %s, want %s", ready.User, ready.Application, a.id)
	}
	reg := await(t, events, "registered", func(e botEvent) bool { return e.Ev == "registered" })
	if reg.Ping == "" || reg.Slow == "" {
		t.Fatalf("registered = %+v", reg)
	}
	invoke := func(commandID, name string) time.Time {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code, raw, err := resttest.Do(ctx, nil, "POST", "http://"+router+"/api/v10/interactions", w.member, map[string]any{
			"type": 2, "application_id": a.id, "guild_id": w.guild, "channel_id": w.channel,
			"data": map[string]any{"id": commandID, "name": name, "type": 1},
		}, nil)
		if err != nil || code != http.StatusNoContent {
			t.Fatalf("invoke /%s: status %d %s (%v)", name, code, raw, err)
		}
		return start
	}
	type histMsg struct {
		ID, Content string
		Author      struct{ ID string }
	}
	history := func() map[string]histMsg {
		var list []histMsg
		resttest.Call(t, router, w.member, "GET", "/channels/"+w.channel+"/messages?limit=50", nil, &list)
		out := map[string]histMsg{}
		for _, m := range list {
			out[m.ID] = m
		}
		return out
	}

	start := invoke(reg.Ping, "ping")
	ix := await(t, events, "the ping interaction", func(e botEvent) bool { return e.Ev == "interaction" })
	if ix.Command != "ping" || ix.User != w.memberID {
		t.Fatalf("interaction = %+v, want ping by %s", ix, w.memberID)
	}
	replied := await(t, events, "the reply", func(e botEvent) bool { return e.Ev == "replied" })
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("reply took %s, over the 3 s acknowledgement window", took)
	}
	if m, ok := history()[replied.ID]; !ok || m.Content != "pong" || m.Author.ID != a.id {
		t.Fatalf("member's history has reply %s as %+v (found %v)", replied.ID, m, ok)
	}

	invoke(reg.Slow, "slow")
	await(t, events, "the slow interaction", func(e botEvent) bool { return e.Ev == "interaction" && e.Command == "slow" })
	await(t, events, "deferred", func(e botEvent) bool { return e.Ev == "deferred" })
	edited := await(t, events, "edited", func(e botEvent) bool { return e.Ev == "edited" })
	follow := await(t, events, "followup", func(e botEvent) bool { return e.Ev == "followup" })
	h := history()
	if m, ok := h[edited.ID]; !ok || m.Content != "slow pong" || m.Author.ID != a.id {
		t.Fatalf("member's history has the deferred response %s as %+v (found %v)", edited.ID, m, ok)
	}
	if m, ok := h[follow.ID]; !ok || m.Content != "and a followup" || m.Author.ID != a.id {
		t.Fatalf("member's history has the followup %s as %+v (found %v)", follow.ID, m, ok)
	}
}
