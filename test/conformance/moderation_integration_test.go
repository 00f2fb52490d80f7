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
	Action   string   `json:"action"`
	Code     int      `json:"code"`
	Status   int      `json:"status"`
}

// modTargets are the members the moderation bot kicks or must fail to act
// on: kick is an ordinary member, senior holds a role ranked above the
// bot's highest, owner owns the guild.
type modTargets struct {
	kick, senior, owner string
}

// addModTargets adds a member to kick and a senior member whose role is
// moved above botRole, and checks the order took.
func addModTargets(t *testing.T, s *server, owner *rest, guildID, channelID, botRole, tag string) modTargets {
	t.Helper()
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	kickee, kickID := s.register("kickee-" + tag)
	kickee.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	senior, seniorID := s.register("senior-" + tag)
	senior.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	var role struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds/"+guildID+"/roles", map[string]any{"name": "senior"}, &role)
	var roles []struct {
		ID       string `json:"id"`
		Position int    `json:"position"`
	}
	owner.do("GET", "/guilds/"+guildID+"/roles", nil, &roles)
	owner.do("PATCH", "/guilds/"+guildID+"/roles", []map[string]any{{"id": role.ID, "position": len(roles)}}, &roles)
	pos := map[string]int{}
	for _, r := range roles {
		pos[r.ID] = r.Position
	}
	if pos[role.ID] <= pos[botRole] {
		t.Fatalf("senior role at %d not above the bot's at %d: %+v", pos[role.ID], pos[botRole], roles)
	}
	owner.do("PUT", "/guilds/"+guildID+"/members/"+seniorID+"/roles/"+role.ID, nil, nil)
	var me struct {
		ID string `json:"id"`
	}
	owner.do("GET", "/users/@me", nil, &me)
	return modTargets{kick: kickID, senior: seniorID, owner: me.ID}
}

// moderationWorld gives the bot a role with the moderation permissions
// and adds a member for it to ban.
func moderationWorld(s *server, tag string) (world, string, string) {
	w := newWorld(s, tag)
	const perms = 1<<1 | 1<<2 | 1<<6 | 1<<7 | 1<<13 | 1<<16 | 1<<10 | 1<<11 // ban, reactions, audit log, manage messages, history, view, send
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
	return w, victimID, role.ID
}

// checkModeration drives a moderation bot (either library) through
// embeds, reactions, pins, a ban with its audit entry and an unban.
func checkModeration(t *testing.T, s *server, w world, victimID string, more modTargets, events <-chan modEvent) {
	is := func(name string) func(modEvent) bool { return func(e modEvent) bool { return e.Ev == name } }
	waitFor(t, events, "ready", is("ready"))
	var cmd struct {
		ID string `json:"id"`
	}
	w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "mod " + victimID + " " + more.kick + " " + more.senior + " " + more.owner}, &cmd)
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
	if e := waitFor(t, events, "kicked", is("kicked")); e.Target != more.kick || e.Reason != "conformance kick" || e.Executor != w.botID {
		t.Fatalf("kick audit entry read back: %+v", e)
	}
	if code := w.owner.do("GET", "/guilds/"+w.guildID+"/members/"+more.kick, nil, nil); code != 404 {
		t.Fatalf("kicked member still a member: GET = %d", code)
	}
	// Hierarchy: a member ranked above the bot and the owner are refused
	// with 403 / 50013, and stay.
	for _, want := range []struct{ action, user string }{{"ban", more.senior}, {"kick", more.owner}} {
		if e := waitFor(t, events, want.action+" refused", func(e modEvent) bool { return e.Ev == "refused" && e.Action == want.action }); e.User != want.user || e.Code != 50013 || e.Status != 403 {
			t.Fatalf("%s of %s: %+v, want 403 / 50013", want.action, want.user, e)
		}
	}
	if code := w.owner.do("GET", "/guilds/"+w.guildID+"/members/"+more.senior, nil, nil); code != 200 {
		t.Fatalf("senior member after a refused ban: GET = %d", code)
	}
	if code := w.owner.do("GET", "/guilds/"+w.guildID+"/bans/"+more.senior, nil, nil); code != 404 {
		t.Fatalf("senior member banned anyway: GET ban = %d", code)
	}
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
	w, victimID, botRole := moderationWorld(s, "djsmod")
	more := addModTargets(t, s, w.owner, w.guildID, w.channel, botRole, "djsmod")
	events := startNodeBot[modEvent](t, dir, "moderation.js",
		[]string{"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + w.botToken}, nil)
	checkModeration(t, s, w, victimID, more, events)
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
	botRole := install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory|1<<1|1<<2|1<<6|1<<7|1<<13)
	victim, victimID := s.register("victim-dpymod")
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	victim.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	victim.do("POST", "/channels/"+channelID+"/messages", map[string]any{"content": "spam"}, &map[string]any{})
	more := addModTargets(t, s, owner, guildID, channelID, botRole, "dpymod")
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	events := startBot[modEvent](t, "discord.py", dir, []string{py, "moderation.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + a.Token}, nil)
	w := world{owner: owner, botID: a.BotID, guildID: guildID, channel: channelID}
	checkModeration(t, s, w, victimID, more, events)
}
