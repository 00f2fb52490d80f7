//go:build integration

package conformance

import (
	"testing"
)

// jsEvent is one line printed by js/bot.js.
type jsEvent struct {
	Ev        string `json:"ev"`
	ID        string `json:"id"`
	User      string `json:"user"`
	Content   string `json:"content"`
	Author    string `json:"author"`
	Reference string `json:"reference"`
	Message   string `json:"message"`
	Guilds    []struct {
		ID       string   `json:"id"`
		Channels []string `json:"channels"`
	} `json:"guilds"`
}

// TestDiscordJSBot runs the unmodified discord.js bot in js/bot.js (the
// version pinned in js/package-lock.json, installed by `make test`).
func TestDiscordJSBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	w := newWorld(s, "djs")
	resumed := make(chan struct{}, 8)
	events := startNodeBot(t, dir, "bot.js",
		[]string{"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + w.botToken},
		func(e jsEvent) {
			if e.Ev == "resumed" {
				resumed <- struct{}{}
			}
		})
	is := func(name string) func(jsEvent) bool { return func(e jsEvent) bool { return e.Ev == name } }

	ready := waitFor(t, events, "ready", is("ready"))
	if ready.User != w.botID {
		t.Fatalf("ready as %s, want %s", ready.User, w.botID)
	}
	cached := false
	for _, g := range ready.Guilds {
		for _, c := range g.Channels {
			cached = cached || (g.ID == w.guildID && c == w.channel)
		}
	}
	if !cached {
		t.Fatalf("discord.js cache after ready lacks guild %s channel %s: %+v", w.guildID, w.channel, ready.Guilds)
	}

	var ping struct {
		ID string `json:"id"`
	}
	w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "ping"}, &ping)
	waitFor(t, events, "messageCreate ping", func(e jsEvent) bool { return e.Ev == "messageCreate" && e.ID == ping.ID && e.Content == "ping" })
	replied := waitFor(t, events, "replied", is("replied"))
	if replied.Reference != ping.ID {
		t.Fatalf("reply references %q, want %s", replied.Reference, ping.ID)
	}
	edited := waitFor(t, events, "edited", is("edited"))
	if edited.Content != "pong (edited)" {
		t.Fatalf("edited content %q", edited.Content)
	}
	waitFor(t, events, "deleted", is("deleted"))
	var history []struct {
		ID string `json:"id"`
	}
	w.owner.do("GET", "/channels/"+w.channel+"/messages?limit=10", nil, &history)
	for _, m := range history {
		if m.ID == replied.ID {
			t.Fatalf("deleted reply %s still in history", replied.ID)
		}
	}

	// Cut the socket; what is posted meanwhile arrives after the resume, in order.
	if n := s.proxy.cut(); n == 0 {
		t.Fatal("proxy had no connection to cut")
	}
	var want []string
	for i := 0; i < 5; i++ {
		var m struct {
			ID string `json:"id"`
		}
		w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "while away"}, &m)
		want = append(want, m.ID)
	}
	for i, id := range want {
		e := waitFor(t, events, "messageCreate after drop", func(e jsEvent) bool { return e.Ev == "messageCreate" || e.Ev == "ready" })
		if e.Ev == "ready" {
			t.Fatal("discord.js re-identified instead of resuming")
		}
		if e.ID != id {
			t.Fatalf("after the drop event %d is %s, want %s (order or gap)", i, e.ID, id)
		}
	}
	waitFor(t, resumed, "shardResume", func(struct{}) bool { return true })
}
