//go:build integration

package conformance

import (
	"path/filepath"
	"slices"
	"testing"
)

// roleEvent is one line printed by js/reactionroles.js or
// py/reactionroles.py.
type roleEvent struct {
	Ev        string `json:"ev"`
	Message   string `json:"message"`
	Emoji     string `json:"emoji"`
	User      string `json:"user"`
	Guild     string `json:"guild"`
	Role      string `json:"role"`
	Has       bool   `json:"has"`
	Code      int    `json:"code"`
	Status    int    `json:"status"`
	Reactions int    `json:"reactions"`
}

// roleWorld is a guild with an application bot allowed to manage roles, a
// role below the bot's (grantable), one above it (not), and a member who
// reacts.
type roleWorld struct {
	owner, member    *rest
	memberID         string
	guildID, channel string
	app              app
	low, high        string
	botRole          string
	botEnv           []string
	memberPath       string
}

const permManageRoles = 1 << 28

func newRoleWorld(t *testing.T, s *server, tag string) *roleWorld {
	t.Helper()
	owner, _ := s.register("owner-" + tag)
	guildID, channelID := newGuild(t, owner, "reaction roles "+tag)
	a := createApp(t, s, owner, tag)
	const addReactions = 1 << 6
	botRole := install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory|addReactions|permManageRoles)
	var low, high struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds/"+guildID+"/roles", map[string]any{"name": "party"}, &low)
	owner.do("POST", "/guilds/"+guildID+"/roles", map[string]any{"name": "star"}, &high)
	var roles []struct {
		ID       string `json:"id"`
		Position int    `json:"position"`
	}
	owner.do("PATCH", "/guilds/"+guildID+"/roles", []map[string]any{{"id": high.ID, "position": 3}}, &roles)
	pos := map[string]int{}
	for _, r := range roles {
		pos[r.ID] = r.Position
	}
	if !(pos[low.ID] < pos[botRole] && pos[botRole] < pos[high.ID]) {
		t.Fatalf("role order party %d < bot %d < star %d not set up: %+v", pos[low.ID], pos[botRole], pos[high.ID], roles)
	}
	member, memberID := s.register("member-" + tag)
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	member.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	return &roleWorld{owner: owner, member: member, memberID: memberID, guildID: guildID, channel: channelID, app: a,
		low: low.ID, high: high.ID, botRole: botRole,
		botEnv:     []string{"CONCORD_TOKEN=" + a.Token, "CONCORD_CHANNEL=" + channelID, "CONCORD_ROLE=" + low.ID, "CONCORD_HIGH_ROLE=" + high.ID},
		memberPath: "/guilds/" + guildID + "/members/" + memberID}
}

// memberRoles reads the member's roles over REST, as the owner.
func (w *roleWorld) memberRoles() []string {
	var m struct {
		Roles []string `json:"roles"`
	}
	w.owner.do("GET", w.memberPath, nil, &m)
	return m.Roles
}

// checkReactionRoles drives a reaction-role bot of either library: the
// member reacts and unreacts over REST, the bot sees each reaction
// through the gateway and grants or removes the role, and a role above
// the bot's is refused with 50013.
func checkReactionRoles(t *testing.T, w *roleWorld, events <-chan roleEvent) {
	is := func(name string) func(roleEvent) bool { return func(e roleEvent) bool { return e.Ev == name } }
	waitFor(t, events, "ready", is("ready"))
	posted := waitFor(t, events, "posted", is("posted"))
	if posted.Reactions != 2 {
		t.Fatalf("menu posted with %d reactions, want 2", posted.Reactions)
	}
	react := func(method, emoji string) {
		t.Helper()
		if code := w.member.do(method, "/channels/"+w.channel+"/messages/"+posted.Message+"/reactions/"+emoji+"/@me", nil, nil); code != 204 {
			t.Fatalf("%s reaction %s: status %d", method, emoji, code)
		}
	}
	react("PUT", "%F0%9F%8E%89") // 🎉
	if e := waitFor(t, events, "reactionAdd", is("reactionAdd")); e.User != w.memberID || e.Emoji != "🎉" || e.Message != posted.Message || e.Guild != w.guildID {
		t.Fatalf("reaction add as the library saw it: %+v", e)
	}
	if e := waitFor(t, events, "granted", is("granted")); !e.Has || e.Role != w.low {
		t.Fatalf("grant as the library read it back: %+v", e)
	}
	if roles := w.memberRoles(); !slices.Contains(roles, w.low) {
		t.Fatalf("member roles after 🎉 = %v, want %s", roles, w.low)
	}

	react("PUT", "%E2%AD%90") // ⭐, whose role ranks above the bot's
	if e := waitFor(t, events, "refused", is("refused")); e.Code != 50013 || e.Status != 403 || e.Role != w.high {
		t.Fatalf("granting a role above the bot's: %+v, want 403 / 50013", e)
	}
	if roles := w.memberRoles(); slices.Contains(roles, w.high) {
		t.Fatalf("member got the role ranked above the bot's: %v", roles)
	}

	react("DELETE", "%F0%9F%8E%89")
	if e := waitFor(t, events, "reactionRemove", is("reactionRemove")); e.User != w.memberID || e.Emoji != "🎉" {
		t.Fatalf("reaction remove as the library saw it: %+v", e)
	}
	if e := waitFor(t, events, "revoked", is("revoked")); e.Has || e.Role != w.low {
		t.Fatalf("revoke as the library read it back: %+v", e)
	}
	if roles := w.memberRoles(); slices.Contains(roles, w.low) {
		t.Fatalf("member roles after removing 🎉 = %v, still %s", roles, w.low)
	}
	// The role changes are in the audit log with the bot's reason.
	var log struct {
		Entries []struct {
			UserID   string `json:"user_id"`
			TargetID string `json:"target_id"`
			Reason   string `json:"reason"`
		} `json:"audit_log_entries"`
	}
	w.owner.do("GET", "/guilds/"+w.guildID+"/audit-logs?action_type=25", nil, &log)
	n := 0
	for _, e := range log.Entries {
		if e.UserID == w.app.BotID && e.TargetID == w.memberID && e.Reason == "reaction role" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("MEMBER_ROLE_UPDATE entries by the bot with its reason = %d, want 2: %+v", n, log.Entries)
	}
}

// TestDiscordJSReactionRoleBot runs js/reactionroles.js, an unmodified
// discord.js 14 bot of a real application.
func TestDiscordJSReactionRoleBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	w := newRoleWorld(t, s, "djsroles")
	events := startNodeBot[roleEvent](t, dir, "reactionroles.js",
		append([]string{"CONCORD_API=http://" + s.proxy.addr() + "/api"}, w.botEnv...), nil)
	checkReactionRoles(t, w, events)
}

// TestDiscordPyReactionRoleBot runs py/reactionroles.py, an unmodified
// discord.py 2 bot of a real application.
func TestDiscordPyReactionRoleBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	w := newRoleWorld(t, s, "dpyroles")
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	events := startBot[roleEvent](t, "discord.py", dir, []string{py, "reactionroles.py"},
		append([]string{"CONCORD_HOST=" + s.proxy.addr()}, w.botEnv...), nil)
	checkReactionRoles(t, w, events)
}
