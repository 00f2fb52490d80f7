//go:build integration

package conformance

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// ixEvent is one line printed by js/interactions.js.
type ixEvent struct {
	Ev          string `json:"ev"`
	ID          string `json:"id"`
	User        string `json:"user"`
	Application string `json:"application"`
	Command     string `json:"command"`
	Content     string `json:"content"`
	Ping        string `json:"ping"`
	Slow        string `json:"slow"`
	Message     string `json:"message"`
}

// TestDiscordJSInteractions runs the unmodified discord.js application bot
// in js/interactions.js: it registers two guild slash commands through
// REST; a member invokes /ping with POST /interactions and sees the bot's
// reply in channel history within the 3 s acknowledgement window; then
// /slow, which the bot defers, edits and follows up, and the member sees
// the edited response and the followup.
func TestDiscordJSInteractions(t *testing.T) {
	dir := jsDir(t)
	script, err := filepath.Abs(filepath.Join("js", "interactions.js"))
	must(t, err, "script path")

	s := startServerWith(t, nil)
	owner, _ := s.register("ix-owner")
	member, memberID := s.register("ix-member")
	guildID, channelID := newGuild(t, owner, "Interactions")
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	member.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	a := createApp(t, s, owner, "Interactor")
	install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory)

	events := startNodeBot[ixEvent](t, dir, script, []string{"NODE_PATH=" + filepath.Join(dir, "node_modules"),
		"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + a.Token, "CONCORD_GUILD=" + guildID}, nil)
	is := func(name string) func(ixEvent) bool { return func(e ixEvent) bool { return e.Ev == name } }

	ready := waitFor(t, events, "ready", is("ready"))
	if ready.User != a.BotID || ready.Application != a.ID {
		t.Fatalf("ready as user %s application %s, want %s and %s", ready.User, ready.Application, a.BotID, a.ID)
	}
	reg := waitFor(t, events, "registered", is("registered"))
	if reg.Ping == "" || reg.Slow == "" {
		t.Fatalf("registered = %+v", reg)
	}
	var listed []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	a.bot.do("GET", "/applications/"+a.ID+"/guilds/"+guildID+"/commands", nil, &listed)
	if len(listed) != 2 {
		t.Fatalf("guild commands = %+v, want ping and slow", listed)
	}

	invoke := func(commandID, name string) time.Time {
		start := time.Now()
		code := member.do("POST", "/interactions", map[string]any{
			"type": 2, "application_id": a.ID, "guild_id": guildID, "channel_id": channelID,
			"data": map[string]any{"id": commandID, "name": name, "type": 1},
		}, nil)
		if code != http.StatusNoContent {
			t.Fatalf("invoke /%s: status %d", name, code)
		}
		return start
	}
	// history returns the channel's messages by id, as the member reads them.
	type histMsg struct {
		ID      string `json:"id"`
		Content string `json:"content"`
		Flags   int    `json:"flags"`
		Author  struct {
			ID string `json:"id"`
		} `json:"author"`
	}
	history := func() map[string]histMsg {
		var list []histMsg
		member.do("GET", "/channels/"+channelID+"/messages?limit=50", nil, &list)
		out := map[string]histMsg{}
		for _, m := range list {
			out[m.ID] = m
		}
		return out
	}

	// /ping: answered with a reply inside the acknowledgement window.
	start := invoke(reg.Ping, "ping")
	ix := waitFor(t, events, "interaction ping", is("interaction"))
	if ix.Command != "ping" || ix.User != memberID {
		t.Fatalf("interaction = %+v, want ping by %s", ix, memberID)
	}
	replied := waitFor(t, events, "replied", is("replied"))
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("reply took %s, over the 3 s window", took)
	}
	if replied.Content != "pong" {
		t.Fatalf("reply content %q", replied.Content)
	}
	if m, ok := history()[replied.ID]; !ok || m.Content != "pong" || m.Author.ID != a.BotID {
		t.Fatalf("member's history has reply %s as %+v (found %v)", replied.ID, m, ok)
	}

	// /slow: deferred, then edited and followed up.
	invoke(reg.Slow, "slow")
	waitFor(t, events, "interaction slow", func(e ixEvent) bool { return e.Ev == "interaction" && e.Command == "slow" })
	waitFor(t, events, "deferred", is("deferred"))
	edited := waitFor(t, events, "edited", is("edited"))
	follow := waitFor(t, events, "followup", is("followup"))
	h := history()
	if m, ok := h[edited.ID]; !ok || m.Content != "slow pong" || m.Author.ID != a.BotID || m.Flags&(1<<7) != 0 {
		t.Fatalf("member's history has the deferred response %s as %+v (found %v)", edited.ID, m, ok)
	}
	if m, ok := h[follow.ID]; !ok || m.Content != "and a followup" || m.Author.ID != a.BotID {
		t.Fatalf("member's history has the followup %s as %+v (found %v)", follow.ID, m, ok)
	}
}
