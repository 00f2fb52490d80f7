//go:build integration

package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// flagGatewayMessageContent is the application flag that lets its bot
// request the MESSAGE_CONTENT intent.
const flagGatewayMessageContent = 1 << 18

// pyEvent is one line printed by py/bot.py.
type pyEvent struct {
	Ev          string   `json:"ev"`
	ID          string   `json:"id"`
	User        string   `json:"user"`
	Application string   `json:"application"`
	Content     string   `json:"content"`
	Author      string   `json:"author"`
	Reference   string   `json:"reference"`
	Message     string   `json:"message"`
	IDs         []string `json:"ids"`
	Guilds      []struct {
		ID       string   `json:"id"`
		Channels []string `json:"channels"`
	} `json:"guilds"`
}

// pythonBin returns the venv interpreter `make test` installed discord.py
// into (CONCORD_PY), failing the test with what to run when it is missing.
func pythonBin(t *testing.T) string {
	t.Helper()
	py := os.Getenv("CONCORD_PY")
	if py == "" {
		t.Fatal("CONCORD_PY is not set: run `make test`, whose hack/test-deps.sh installs discord.py into a venv")
	}
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("CONCORD_PY=%s is missing (run `make test`): %v", py, err)
	}
	return py
}

// TestDiscordPyBot runs the unmodified discord.py bot in py/bot.py (the
// versions pinned in py/requirements.txt) as a real application's bot:
// login (/users/@me, /oauth2/applications/@me), READY and the guild cache,
// a reply edited and deleted, and a resume after the socket is cut.
func TestDiscordPyBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	owner, _ := s.register("owner-dpy")
	guildID, channelID := newGuild(t, owner, "discord.py")
	a := createApp(t, s, owner, "dpy")
	// The bot asks for MESSAGE_CONTENT, a privileged intent: without the
	// owner enabling it (the portal switch on Discord) IDENTIFY closes 4014.
	var flags struct {
		Flags int `json:"flags"`
	}
	owner.do("PATCH", "/applications/"+a.ID, map[string]any{"flags": flagGatewayMessageContent}, &flags)
	if flags.Flags&flagGatewayMessageContent == 0 {
		t.Fatalf("application flags %b after enabling MESSAGE_CONTENT", flags.Flags)
	}
	install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory)

	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	resumed := make(chan struct{}, 8)
	var limited atomic.Int32
	events := startBot(t, "discord.py", dir, []string{py, "bot.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + a.Token},
		func(e pyEvent) {
			switch e.Ev {
			case "resumed":
				resumed <- struct{}{}
			case "rate_limited":
				limited.Add(1)
			}
		})
	is := func(name string) func(pyEvent) bool { return func(e pyEvent) bool { return e.Ev == name } }

	ready := waitFor(t, events, "ready", is("ready"))
	if ready.User != a.BotID {
		t.Fatalf("ready as %s, want bot user %s", ready.User, a.BotID)
	}
	if ready.Application != a.ID {
		t.Fatalf("application_info() is %s, want %s", ready.Application, a.ID)
	}
	cached := false
	for _, g := range ready.Guilds {
		for _, c := range g.Channels {
			cached = cached || (g.ID == guildID && c == channelID)
		}
	}
	if !cached {
		t.Fatalf("discord.py cache after ready lacks guild %s channel %s: %+v", guildID, channelID, ready.Guilds)
	}

	var ping struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/channels/"+channelID+"/messages", map[string]any{"content": "ping"}, &ping)
	waitFor(t, events, "message_create ping", func(e pyEvent) bool {
		return e.Ev == "message_create" && e.ID == ping.ID && e.Content == "ping"
	})
	replied := waitFor(t, events, "replied", is("replied"))
	if replied.Reference != ping.ID {
		t.Fatalf("reply references %q, want %s", replied.Reference, ping.ID)
	}
	edited := waitFor(t, events, "edited", is("edited"))
	if edited.ID != replied.ID || edited.Content != "pong (edited)" {
		t.Fatalf("edited %s content %q, want %s %q", edited.ID, edited.Content, replied.ID, "pong (edited)")
	}
	waitFor(t, events, "deleted", is("deleted"))
	var history []struct {
		ID string `json:"id"`
	}
	owner.do("GET", "/channels/"+channelID+"/messages?limit=10", nil, &history)
	sawPing := false
	for _, m := range history {
		if m.ID == replied.ID {
			t.Fatalf("deleted reply %s still in history", replied.ID)
		}
		sawPing = sawPing || m.ID == ping.ID
	}
	if !sawPing {
		t.Fatalf("ping %s missing from history %+v", ping.ID, history)
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
		owner.do("POST", "/channels/"+channelID+"/messages", map[string]any{"content": "while away"}, &m)
		want = append(want, m.ID)
	}
	for i, id := range want {
		e := waitFor(t, events, "message_create after drop", func(e pyEvent) bool { return e.Ev == "message_create" || e.Ev == "ready" })
		if e.Ev == "ready" {
			t.Fatal("discord.py re-identified instead of resuming")
		}
		if e.ID != id {
			t.Fatalf("after the drop event %d is %s, want %s (order or gap)", i, e.ID, id)
		}
	}
	waitFor(t, resumed, "on_resumed", func(struct{}) bool { return true })

	// Exhaust the bot's message bucket (5 per 5 s per channel) behind
	// discord.py's back, then have it send a burst: its first sends get
	// 429s, which it waits out and retries only when they carry Via
	// (without Via it assumes a Cloudflare ban and raises), so every
	// message lands and at least one retry is logged.
	for i := 0; i < 5; i++ {
		if code := a.bot.do("POST", "/channels/"+channelID+"/messages", map[string]any{"content": "exhaust"}, nil); code != 200 {
			t.Fatalf("exhausting post %d: status %d", i, code)
		}
	}
	const burst = 3
	owner.do("POST", "/channels/"+channelID+"/messages", map[string]any{"content": fmt.Sprint("burst ", burst)}, nil)
	sent := waitFor(t, events, "burst", is("burst"))
	if len(sent.IDs) != burst {
		t.Fatalf("burst sent %d messages, want %d", len(sent.IDs), burst)
	}
	var after []struct {
		ID string `json:"id"`
	}
	owner.do("GET", "/channels/"+channelID+"/messages?limit=50", nil, &after)
	stored := map[string]bool{}
	for _, m := range after {
		stored[m.ID] = true
	}
	for _, id := range sent.IDs {
		if !stored[id] {
			t.Fatalf("burst message %s missing from history", id)
		}
	}
	if limited.Load() == 0 {
		t.Fatal("discord.py logged no 429 retry although the bucket was exhausted")
	}
}
