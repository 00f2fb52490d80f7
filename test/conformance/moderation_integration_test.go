//go:build integration

package conformance

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// modEvent is one line printed by js/moderation.js or py/moderation.py.
type modEvent struct {
	Ev       string   `json:"ev"`
	User     string   `json:"user"`
	Users    []string `json:"users"`
	Embeds   int      `json:"embeds"`
	Title    string   `json:"title"`
	Field    string   `json:"field"`
	Count    int      `json:"count"`
	Reason   string   `json:"reason"`
	Target   string   `json:"target"`
	Executor string   `json:"executor"`
	Emoji    string   `json:"emoji"`
	Message  string   `json:"message"`
}

// moderationWorld gives the bot a role with the moderation permissions
// and adds a member for it to ban.
func moderationWorld(s *server, tag string) (world, string) {
	w := newWorld(s, tag)
	const perms = 1<<2 | 1<<6 | 1<<7 | 1<<13 | 1<<16 | 1<<10 | 1<<11 // ban, reactions, audit log, manage messages, history, view, send
	var role struct {
		ID string `json:"id"`
	}
	w.owner.do("POST", "/guilds/"+w.guildID+"/roles", map[string]any{"name": "mod", "permissions": fmt.Sprint(perms)}, &role)
	w.owner.do("PUT", "/guilds/"+w.guildID+"/members/"+w.botID+"/roles/"+role.ID, nil, nil)
	victim, victimID := s.register("victim-" + tag)
	var inv struct {
		Code string `json:"code"`
	}
	w.owner.do("POST", "/channels/"+w.channel+"/invites", map[string]any{}, &inv)
	victim.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	var spam struct {
		ID string `json:"id"`
	}
	victim.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "spam"}, &spam)
	return w, victimID
}

// checkModeration drives a moderation bot (either library) through
// embeds, reactions, pins, a ban with its audit entry and an unban.
func checkModeration(t *testing.T, s *server, w world, victimID string, events <-chan modEvent) {
	is := func(name string) func(modEvent) bool { return func(e modEvent) bool { return e.Ev == name } }
	waitFor(t, events, "ready", is("ready"))
	var cmd struct {
		ID string `json:"id"`
	}
	w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "mod " + victimID}, &cmd)
	if e := waitFor(t, events, "embedSent", is("embedSent")); e.Embeds != 1 || e.Title != "Moderation" || e.Field != victimID {
		t.Fatalf("embed as the library read it back: %+v", e)
	}
	if e := waitFor(t, events, "reacted", is("reacted")); !slices.Contains(e.Users, w.botID) {
		t.Fatalf("reaction users %v lack the bot %s", e.Users, w.botID)
	}
	if e := waitFor(t, events, "pinned", is("pinned")); e.Count != 1 {
		t.Fatalf("pins = %d", e.Count)
	}
	if e := waitFor(t, events, "banned", is("banned")); e.User != victimID || e.Reason != "conformance ban" {
		t.Fatalf("ban read back: %+v", e)
	}
	if e := waitFor(t, events, "audit", is("audit")); e.Count < 1 || e.Target != victimID || e.Reason != "conformance ban" || e.Executor != w.botID {
		t.Fatalf("audit log read back: %+v", e)
	}
	waitFor(t, events, "unbanned", is("unbanned"))
	var pins []struct {
		ID string `json:"id"`
	}
	w.owner.do("GET", "/channels/"+w.channel+"/pins", nil, &pins)
	if len(pins) != 1 || pins[0].ID != cmd.ID {
		t.Fatalf("pins over REST: %+v", pins)
	}
	var history []struct {
		Content string `json:"content"`
	}
	w.owner.do("GET", "/channels/"+w.channel+"/messages?limit=50", nil, &history)
	for _, m := range history {
		if m.Content == "spam" {
			t.Fatal("the banned member's recent message survived delete_message_seconds")
		}
	}
}

// TestDiscordJSModerationBot runs js/moderation.js, an unmodified
// discord.js 14 bot, through embeds, reactions, pins, bans and the audit
// log.
func TestDiscordJSModerationBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	w, victimID := moderationWorld(s, "djsmod")
	events := startNodeBot[modEvent](t, dir, "moderation.js",
		[]string{"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + w.botToken}, nil)
	checkModeration(t, s, w, victimID, events)
}

// TestDiscordPyModerationBot runs py/moderation.py, an unmodified
// discord.py 2 bot of a real application, through the same steps.
func TestDiscordPyModerationBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	owner, _ := s.register("owner-dpymod")
	guildID, channelID := newGuild(t, owner, "discord.py moderation")
	a := createApp(t, s, owner, "dpymod")
	owner.do("PATCH", "/applications/"+a.ID, map[string]any{"flags": flagGatewayMessageContent}, &map[string]any{})
	install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory|1<<2|1<<6|1<<7|1<<13)
	victim, victimID := s.register("victim-dpymod")
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	victim.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	victim.do("POST", "/channels/"+channelID+"/messages", map[string]any{"content": "spam"}, &map[string]any{})
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	events := startBot[modEvent](t, "discord.py", dir, []string{py, "moderation.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + a.Token}, nil)
	w := world{owner: owner, botID: a.BotID, guildID: guildID, channel: channelID}
	checkModeration(t, s, w, victimID, events)
}
