package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// callH is call with extra request headers.
func (e *env) callH(method, path, token string, body any, hdr map[string]string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// subscribe attaches a gateway session for user and waits for its
// GUILD_CREATE.
func (e *env) subscribe(id string, user snowflake.ID, intents uint64) event.SessionID {
	e.t.Helper()
	if e.conns != nil {
		e.attach(event.SessionID(id), user, intents)
		return event.SessionID(id)
	}
	s := event.Session{ID: event.SessionID(id), UserID: user, Node: "n1", Bot: intents != 0, Intents: intents}
	if err := e.guilds.Subscribe(e.t.Context(), s); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor(s.ID, "GUILD_CREATE", func(ds []delivery) bool { return len(ds) >= 1 })
	return s.ID
}

// waitEvent waits for the n-th (1-based) event of type typ.
func (e *env) waitEvent(sess event.SessionID, typ string, n int) json.RawMessage {
	e.t.Helper()
	var got json.RawMessage
	e.waitFor(sess, typ, func(ds []delivery) bool {
		c := 0
		for _, d := range ds {
			if d.Type == typ {
				c++
				if c == n {
					got = d.Payload
					return true
				}
			}
		}
		return false
	})
	return got
}

func countEvents(ds []delivery, typ string) int {
	n := 0
	for _, d := range ds {
		if d.Type == typ {
			n++
		}
	}
	return n
}

func TestReactions(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	aliceS := e.subscribe("alice-r", w.alice.ID, 0)
	bobS := e.subscribe("bob-r", w.bob.ID, 0)
	m := e.post(w.alice.Token, w.general, map[string]any{"content": "vote"})
	hidden := e.post(w.alice.Token, w.staff, map[string]any{"content": "secret"})
	base := fmt.Sprintf("%s/channels/%d/messages/%d/reactions", v10, w.general, m.ID)
	thumbs := url.PathEscape("👍")

	// A reaction in a hidden channel: refused, and its event never
	// reaches bob's session.
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/messages/%d/reactions/%s/@me", v10, w.staff, hidden.ID, thumbs), w.alice.Token, nil, nil)
	e.fail("PUT", fmt.Sprintf("%s/channels/%d/messages/%d/reactions/%s/@me", v10, w.staff, hidden.ID, thumbs), w.bob.Token, nil, 403, 50001)
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages/%d/reactions/%s", v10, w.staff, hidden.ID, thumbs), w.bob.Token, nil, 403, 50001)

	e.ok("PUT", base+"/"+thumbs+"/@me", w.bob.Token, nil, nil)
	e.ok("PUT", base+"/"+thumbs+"/@me", w.bob.Token, nil, nil) // again: no second event
	e.ok("PUT", base+"/party:123/@me", w.alice.Token, nil, nil)
	var add struct {
		UserID          snowflake.ID `json:"user_id"`
		MessageID       snowflake.ID `json:"message_id"`
		GuildID         snowflake.ID `json:"guild_id"`
		MessageAuthorID snowflake.ID `json:"message_author_id"`
		Member          *wire.Member `json:"member"`
		Emoji           wire.Emoji   `json:"emoji"`
	}
	if err := json.Unmarshal(e.waitEvent(aliceS, "MESSAGE_REACTION_ADD", 2), &add); err != nil {
		t.Fatal(err)
	}
	if add.UserID != w.bob.ID || add.MessageID != m.ID || add.GuildID != w.guildID || add.MessageAuthorID != w.alice.ID ||
		add.Member == nil || add.Emoji.Name != "👍" || add.Emoji.ID != nil {
		t.Fatalf("MESSAGE_REACTION_ADD = %+v", add)
	}
	// Each session's events of the guild come in order: once alice's
	// party reaction is there, everything before it is too.
	party := func(ds []delivery) bool {
		for _, d := range ds {
			if d.Type == "MESSAGE_REACTION_ADD" && strings.Contains(string(d.Payload), `"name":"party"`) {
				return true
			}
		}
		return false
	}
	e.waitFor(bobS, "bob's party reaction event", party)
	e.waitFor(aliceS, "alice's party reaction event", party)
	if n := countEvents(e.events(bobS), "MESSAGE_REACTION_ADD"); n != 2 {
		t.Fatalf("bob got %d reaction events (one from the hidden channel?)", n)
	}
	if n := countEvents(e.events(aliceS), "MESSAGE_REACTION_ADD"); n != 3 {
		t.Fatalf("alice got %d reaction events, want 3", n)
	}

	// reactions on the message, with me per viewer.
	var got wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.bob.Token, nil, &got)
	if len(got.Reactions) != 2 || got.Reactions[0].Emoji.Name != "👍" || !got.Reactions[0].Me || got.Reactions[0].Count != 1 ||
		got.Reactions[1].Emoji.ID == nil || *got.Reactions[1].Emoji.ID != 123 || got.Reactions[1].Me {
		t.Fatalf("bob sees reactions %+v", got.Reactions)
	}
	var list []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.alice.Token, nil, &list)
	if len(list) == 0 || list[0].ID != m.ID || len(list[0].Reactions) != 2 || list[0].Reactions[0].Me || !list[0].Reactions[1].Me {
		t.Fatalf("alice's history reactions %+v", list[0].Reactions)
	}

	// Users who reacted, with after and limit.
	e.ok("PUT", base+"/"+thumbs+"/@me", w.alice.Token, nil, nil)
	var users []wire.User
	e.ok("GET", base+"/"+thumbs, w.bob.Token, nil, &users)
	if len(users) != 2 {
		t.Fatalf("users = %+v", users)
	}
	e.ok("GET", fmt.Sprintf("%s/%s?limit=1&after=%d", base, thumbs, users[0].ID), w.bob.Token, nil, &users)
	if len(users) != 1 {
		t.Fatalf("users after = %+v", users)
	}

	// Removing someone else's reaction needs MANAGE_MESSAGES.
	e.fail("DELETE", fmt.Sprintf("%s/%s/%d", base, thumbs, w.alice.ID), w.bob.Token, nil, 403, 50013)
	e.ok("DELETE", fmt.Sprintf("%s/%s/%d", base, thumbs, w.bob.ID), w.alice.Token, nil, nil)
	e.waitEvent(bobS, "MESSAGE_REACTION_REMOVE", 1)
	e.ok("DELETE", base+"/"+thumbs+"/@me", w.alice.Token, nil, nil)
	e.fail("DELETE", base+"/party:123", w.bob.Token, nil, 403, 50013)
	e.ok("DELETE", base+"/party:123", w.alice.Token, nil, nil)
	e.waitEvent(bobS, "MESSAGE_REACTION_REMOVE_EMOJI", 1)
	e.ok("PUT", base+"/"+thumbs+"/@me", w.bob.Token, nil, nil)
	e.fail("DELETE", base, w.bob.Token, nil, 403, 50013)
	e.ok("DELETE", base, w.alice.Token, nil, nil)
	e.waitEvent(bobS, "MESSAGE_REACTION_REMOVE_ALL", 1)
	got = wire.Message{}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.bob.Token, nil, &got)
	if len(got.Reactions) != 0 {
		t.Fatalf("reactions after remove all: %+v", got.Reactions)
	}

	// Errors.
	e.fail("PUT", base+"/notanemoji/@me", w.bob.Token, nil, 400, 10014)
	e.fail("PUT", fmt.Sprintf("%s/channels/%d/messages/1/reactions/%s/@me", v10, w.general, thumbs), w.bob.Token, nil, 404, 10008)

	// Without ADD_REACTIONS a user joins existing reactions only.
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.general, w.guildID), w.alice.Token,
		map[string]any{"type": 0, "deny": fmt.Sprint(uint64(permissions.AddReactions))}, nil)
	e.fail("PUT", base+"/"+thumbs+"/@me", w.bob.Token, nil, 403, 50013)
	e.ok("PUT", base+"/"+thumbs+"/@me", w.alice.Token, nil, nil)
	e.ok("PUT", base+"/"+thumbs+"/@me", w.bob.Token, nil, nil)

	// At most 20 distinct emojis.
	emojis := []string{"😀", "😁", "😂", "🤣", "😃", "😄", "😅", "😆", "😉", "😊", "😋", "😎", "😍", "😘", "🥰", "😗", "😙", "😚", "🙂"}
	for _, em := range emojis {
		e.ok("PUT", base+"/"+url.PathEscape(em)+"/@me", w.alice.Token, nil, nil)
	}
	e.fail("PUT", base+"/"+url.PathEscape("🤗")+"/@me", w.alice.Token, nil, 400, 30010)
}

func TestPins(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob-p", w.bob.ID, 0)
	m1 := e.post(w.alice.Token, w.general, map[string]any{"content": "one"})
	m2 := e.post(w.bob.Token, w.general, map[string]any{"content": "two"})
	ch := fmt.Sprintf("%s/channels/%d", v10, w.general)

	e.fail("PUT", fmt.Sprintf("%s/messages/pins/%d", ch, m1.ID), w.bob.Token, nil, 403, 50013)
	e.ok("PUT", fmt.Sprintf("%s/messages/pins/%d", ch, m1.ID), w.alice.Token, nil, nil)
	e.ok("PUT", fmt.Sprintf("%s/pins/%d", ch, m2.ID), w.alice.Token, nil, nil) // legacy route
	var ev wire.ChannelPinsUpdate
	if err := json.Unmarshal(e.waitEvent(bobS, "CHANNEL_PINS_UPDATE", 2), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ChannelID != w.general || ev.GuildID != w.guildID || ev.LastPinTimestamp == nil {
		t.Fatalf("CHANNEL_PINS_UPDATE = %+v", ev)
	}
	var page struct {
		Items []struct {
			PinnedAt wire.Timestamp `json:"pinned_at"`
			Message  wire.Message   `json:"message"`
		} `json:"items"`
		HasMore bool `json:"has_more"`
	}
	e.ok("GET", ch+"/messages/pins", w.bob.Token, nil, &page)
	if len(page.Items) != 2 || page.Items[0].Message.ID != m2.ID || !page.Items[0].Message.Pinned || page.HasMore {
		t.Fatalf("pins = %+v", page)
	}
	e.ok("GET", ch+"/messages/pins?limit=1", w.bob.Token, nil, &page)
	if len(page.Items) != 1 || !page.HasMore {
		t.Fatalf("pins limit 1 = %+v", page)
	}
	before := url.QueryEscape(page.Items[0].PinnedAt.String())
	e.ok("GET", ch+"/messages/pins?before="+before, w.bob.Token, nil, &page)
	if len(page.Items) != 1 || page.Items[0].Message.ID != m1.ID {
		t.Fatalf("pins before = %+v", page)
	}
	var legacy []wire.Message
	e.ok("GET", ch+"/pins", w.bob.Token, nil, &legacy)
	if len(legacy) != 2 {
		t.Fatalf("legacy pins = %d", len(legacy))
	}
	// The message route no longer swallows the pins route.
	e.fail("GET", ch+"/messages/pins?before=nope", w.bob.Token, nil, 400, 50035)

	e.ok("DELETE", fmt.Sprintf("%s/messages/pins/%d", ch, m2.ID), w.alice.Token, nil, nil)
	var got wire.Message
	e.ok("GET", fmt.Sprintf("%s/messages/%d", ch, m2.ID), w.bob.Token, nil, &got)
	if got.Pinned {
		t.Fatal("unpinned message still pinned")
	}
	e.fail("PUT", fmt.Sprintf("%s/messages/pins/1", ch), w.alice.Token, nil, 404, 10008)
	// Pins of a hidden channel.
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages/pins", v10, w.staff), w.bob.Token, nil, 403, 50001)

	// 50 pins at most.
	for i := 0; i < 49; i++ {
		m := e.post(w.alice.Token, w.general, map[string]any{"content": fmt.Sprint(i)})
		e.ok("PUT", fmt.Sprintf("%s/messages/pins/%d", ch, m.ID), w.alice.Token, nil, nil)
	}
	e.fail("PUT", fmt.Sprintf("%s/messages/pins/%d", ch, m2.ID), w.alice.Token, nil, 400, 30003)
}

func TestBansAndAuditLog(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	aliceS := e.subscribe("alice-b", w.alice.ID, 0)
	bobS := e.subscribe("bob-b", w.bob.ID, 0)
	old := e.post(w.bob.Token, w.general, map[string]any{"content": "spam"})
	kept := e.post(w.alice.Token, w.general, map[string]any{"content": "mine"})

	// Hierarchy: bob has no BAN_MEMBERS; nobody bans the owner.
	e.fail("PUT", fmt.Sprintf("%s/bans/%d", g, w.alice.ID), w.bob.Token, map[string]any{}, 403, 50013)
	carol := e.register("carol", false)
	e.ok("POST", v10+"/invites/"+w.inviteCode, carol.Token, map[string]any{}, nil)
	var mod wire.Role
	e.ok("POST", g+"/roles", w.alice.Token, map[string]any{"name": "mod", "permissions": fmt.Sprint(uint64(permissions.BanMembers | permissions.ViewAuditLog))}, &mod)
	e.ok("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, carol.ID, mod.ID), w.alice.Token, nil, nil)
	e.fail("PUT", fmt.Sprintf("%s/bans/%d", g, w.alice.ID), carol.Token, map[string]any{}, 403, 50013)

	r := e.callH("PUT", fmt.Sprintf("%s/bans/%d", g, w.bob.ID), w.alice.Token, map[string]any{"delete_message_seconds": 3600},
		map[string]string{"X-Audit-Log-Reason": url.PathEscape("spamming links")})
	if r.Status != 204 {
		t.Fatalf("ban: %d %s", r.Status, r.Body)
	}
	e.waitEvent(bobS, "GUILD_DELETE", 1)
	e.waitEvent(aliceS, "GUILD_BAN_ADD", 1)
	e.waitEvent(aliceS, "MESSAGE_DELETE", 1)
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, old.ID), w.alice.Token, nil, 404, 10008)
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, kept.ID), w.alice.Token, nil, nil)

	var ban struct {
		Reason *string   `json:"reason"`
		User   wire.User `json:"user"`
	}
	e.ok("GET", fmt.Sprintf("%s/bans/%d", g, w.bob.ID), carol.Token, nil, &ban)
	if ban.User.ID != w.bob.ID || ban.Reason == nil || *ban.Reason != "spamming links" {
		t.Fatalf("ban = %+v", ban)
	}
	var bans []json.RawMessage
	e.ok("GET", g+"/bans", w.alice.Token, nil, &bans)
	if len(bans) != 1 {
		t.Fatalf("bans = %s", bans)
	}
	e.fail("GET", fmt.Sprintf("%s/bans/%d", g, carol.ID), w.alice.Token, nil, 404, 10026)
	e.fail("GET", g+"/bans", w.bob.Token, nil, 403, 50001) // no longer a member

	// A banned user cannot rejoin through an invite.
	e.fail("POST", v10+"/invites/"+w.inviteCode, w.bob.Token, map[string]any{}, 403, 40007)

	// The audit log: the ban with its reason; VIEW_AUDIT_LOG needed.
	var log struct {
		Entries []struct {
			ID         snowflake.ID      `json:"id"`
			UserID     snowflake.ID      `json:"user_id"`
			TargetID   string            `json:"target_id"`
			ActionType int               `json:"action_type"`
			Reason     string            `json:"reason"`
			Options    map[string]string `json:"options"`
		} `json:"audit_log_entries"`
		Users []wire.User `json:"users"`
	}
	e.ok("GET", g+"/audit-logs?action_type=22", carol.Token, nil, &log)
	if len(log.Entries) != 1 || log.Entries[0].UserID != w.alice.ID || log.Entries[0].TargetID != w.bob.ID.String() ||
		log.Entries[0].Reason != "spamming links" || len(log.Users) != 2 {
		t.Fatalf("audit log = %+v", log)
	}
	if countEvents(e.events(aliceS), "GUILD_AUDIT_LOG_ENTRY_CREATE") != 0 {
		t.Fatal("a user session got a bot-only event")
	}
	dave := e.register("dave", false)
	e.ok("POST", v10+"/invites/"+w.inviteCode, dave.Token, map[string]any{}, nil)
	e.fail("GET", g+"/audit-logs", dave.Token, nil, 403, 50013)

	// Unban: bob may join again.
	e.fail("DELETE", fmt.Sprintf("%s/bans/%d", g, w.bob.ID), dave.Token, nil, 403, 50013)
	e.ok("DELETE", fmt.Sprintf("%s/bans/%d", g, w.bob.ID), w.alice.Token, nil, nil)
	e.waitEvent(aliceS, "GUILD_BAN_REMOVE", 1)
	e.fail("DELETE", fmt.Sprintf("%s/bans/%d", g, w.bob.ID), w.alice.Token, nil, 404, 10026)
	e.ok("POST", v10+"/invites/"+w.inviteCode, w.bob.Token, map[string]any{}, nil)

	// Bulk ban: bob and dave banned, the owner refused.
	var bulk struct {
		Banned []snowflake.ID `json:"banned_users"`
		Failed []snowflake.ID `json:"failed_users"`
	}
	e.ok("POST", g+"/bulk-ban", w.alice.Token, map[string]any{"user_ids": []string{w.bob.ID.String(), dave.ID.String(), w.alice.ID.String()}}, &bulk)
	if len(bulk.Banned) != 2 || len(bulk.Failed) != 1 || bulk.Failed[0] != w.alice.ID {
		t.Fatalf("bulk ban = %+v", bulk)
	}
	e.ok("GET", g+"/bans?limit=1", w.alice.Token, nil, &bans)
	if len(bans) != 1 {
		t.Fatalf("bans limit 1 = %s", bans)
	}
	e.ok("GET", g+"/audit-logs?limit=2", w.alice.Token, nil, &log)
	if len(log.Entries) != 2 || log.Entries[0].ActionType != 22 {
		t.Fatalf("latest audit entries = %+v", log.Entries)
	}
	r = e.fail("PUT", fmt.Sprintf("%s/bans/%d", g, carol.ID), w.alice.Token, map[string]any{"delete_message_seconds": 604801}, 400, 50035)
	formPath(t, r, "delete_message_seconds")

	// The purge window as a query parameter (discord.py sends it so).
	spam := e.post(carol.Token, w.general, map[string]any{"content": "spam"})
	e.ok("PUT", fmt.Sprintf("%s/bans/%d?delete_message_seconds=60", g, carol.ID), w.alice.Token, nil, nil)
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, spam.ID), w.alice.Token, nil, 404, 10008)
}

func TestAuditTrail(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	bot := e.register("logbot", true)
	e.ok("POST", v10+"/invites/"+w.inviteCode, bot.Token, map[string]any{}, nil)
	var logRole wire.Role
	e.ok("POST", g+"/roles", w.alice.Token, map[string]any{"name": "log", "permissions": fmt.Sprint(uint64(permissions.ViewAuditLog))}, &logRole)
	e.ok("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, bot.ID, logRole.ID), w.alice.Token, nil, nil)
	botS := e.subscribe("logbot-1", bot.ID, guildIntentModeration|1)

	reason := map[string]string{"X-Audit-Log-Reason": url.PathEscape("tidy up ✨")}
	if r := e.callH("PATCH", fmt.Sprintf("%s/channels/%d", v10, w.general), w.alice.Token, map[string]any{"topic": "news"}, reason); r.Status != 200 {
		t.Fatalf("patch channel: %d %s", r.Status, r.Body)
	}
	m := e.post(w.bob.Token, w.general, map[string]any{"content": "oops"})
	own := e.post(w.alice.Token, w.general, map[string]any{"content": "mine"})
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.alice.Token, nil, nil)
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, own.ID), w.alice.Token, nil, nil) // own: not audited
	if r := e.callH("DELETE", fmt.Sprintf("%s/members/%d", g, w.bob.ID), w.alice.Token, nil, reason); r.Status != 204 {
		t.Fatalf("kick: %d %s", r.Status, r.Body)
	}
	var log struct {
		Entries []struct {
			UserID     snowflake.ID    `json:"user_id"`
			TargetID   string          `json:"target_id"`
			ActionType int             `json:"action_type"`
			Reason     string          `json:"reason"`
			Changes    json.RawMessage `json:"changes"`
		} `json:"audit_log_entries"`
	}
	e.ok("GET", g+"/audit-logs", bot.Token, nil, &log)
	var actions []int
	for _, en := range log.Entries {
		actions = append(actions, en.ActionType)
	}
	// Newest first: kick, moderator delete, channel update, member role
	// update, role create, then the world's invite and two channels.
	want := []int{auditMemberKick, auditMessageDelete, auditChannelUpdate, auditMemberRoleUpdate, auditRoleCreate,
		auditInviteCreate, auditChannelCreate, auditChannelCreate}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
	if en := log.Entries[0]; en.TargetID != w.bob.ID.String() || en.Reason != "tidy up ✨" || en.UserID != w.alice.ID {
		t.Fatalf("kick entry = %+v", en)
	}
	if en := log.Entries[2]; !strings.Contains(string(en.Changes), `"key":"topic"`) || en.TargetID != w.general.String() {
		t.Fatalf("channel update entry = %+v", en)
	}
	e.ok("GET", fmt.Sprintf("%s/audit-logs?user_id=%d&action_type=%d", g, w.alice.ID, auditMemberKick), bot.Token, nil, &log)
	if len(log.Entries) != 1 {
		t.Fatalf("filtered entries = %+v", log.Entries)
	}
	e.waitEvent(botS, "GUILD_AUDIT_LOG_ENTRY_CREATE", 3)
}

const guildIntentModeration = 1 << 2

// TestAuditOverwritesAndInvites checks the audit entries of permission
// overwrites (13 created, 14 changed, 15 deleted, with options.id and
// options.type as strings: "0" a role, "1" a member) and of an invite's
// deletion (42, the code as old_value).
func TestAuditOverwritesAndInvites(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	ow := fmt.Sprintf("%s/channels/%d/permissions/", v10, w.general)
	deny := fmt.Sprint(uint64(permissions.SendMessages))
	e.ok("PUT", ow+w.bob.ID.String(), w.alice.Token, map[string]any{"type": 1, "deny": deny}, nil)
	e.ok("PUT", ow+w.bob.ID.String(), w.alice.Token, map[string]any{"type": 1, "deny": "0", "allow": deny}, nil)
	e.ok("DELETE", ow+w.bob.ID.String(), w.alice.Token, nil, nil)
	e.ok("PUT", ow+w.guildID.String(), w.alice.Token, map[string]any{"type": 0, "deny": deny}, nil)
	e.ok("DELETE", v10+"/invites/"+w.inviteCode, w.alice.Token, nil, nil)
	var log struct {
		Entries []struct {
			TargetID   string            `json:"target_id"`
			ActionType int               `json:"action_type"`
			Options    map[string]string `json:"options"`
			Changes    []struct {
				Key      string          `json:"key"`
				NewValue json.RawMessage `json:"new_value"`
				OldValue json.RawMessage `json:"old_value"`
			} `json:"changes"`
		} `json:"audit_log_entries"`
	}
	e.ok("GET", g+"/audit-logs?limit=5", w.alice.Token, nil, &log)
	if len(log.Entries) != 5 {
		t.Fatalf("entries = %+v", log.Entries)
	}
	inv, role, del, upd, add := log.Entries[0], log.Entries[1], log.Entries[2], log.Entries[3], log.Entries[4]
	if inv.ActionType != auditInviteDelete || len(inv.Changes) != 1 || inv.Changes[0].Key != "code" || string(inv.Changes[0].OldValue) != `"`+w.inviteCode+`"` {
		t.Fatalf("invite delete entry = %+v", inv)
	}
	for _, c := range []struct {
		name   string
		action int
		typ    string
		id     snowflake.ID
		got    int
	}{{"create", auditOverwriteCreate, "1", w.bob.ID, add.ActionType}, {"update", auditOverwriteUpdate, "1", w.bob.ID, upd.ActionType},
		{"delete", auditOverwriteDelete, "1", w.bob.ID, del.ActionType}, {"role", auditOverwriteCreate, "0", w.guildID, role.ActionType}} {
		if c.got != c.action {
			t.Fatalf("overwrite %s: action %d, want %d", c.name, c.got, c.action)
		}
	}
	for i, en := range []struct {
		typ string
		id  snowflake.ID
	}{{"0", w.guildID}, {"1", w.bob.ID}, {"1", w.bob.ID}, {"1", w.bob.ID}} {
		got := log.Entries[i+1]
		if got.TargetID != w.general.String() || got.Options["id"] != en.id.String() || got.Options["type"] != en.typ {
			t.Fatalf("overwrite entry %d = %+v", i+1, got)
		}
	}
}

func TestSmallerGaps(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	var ms []wire.Member
	e.ok("GET", g+"/members/search?query="+url.QueryEscape(e.name("BO")[:2])+"&limit=10", w.alice.Token, nil, &ms)
	if len(ms) != 1 || ms[0].User.ID != w.bob.ID {
		t.Fatalf("search = %+v", ms)
	}
	r := e.fail("GET", g+"/members/search", w.alice.Token, nil, 400, 50035)
	formPath(t, r, "query")
	var prev map[string]any
	e.ok("GET", g+"/preview", w.bob.Token, nil, &prev)
	if prev["name"] != "Concord HQ" || prev["approximate_member_count"].(float64) != 2 {
		t.Fatalf("preview = %v", prev)
	}
	outsider := e.register("outsider", false)
	e.fail("GET", g+"/preview", outsider.Token, nil, 403, 50001)
	e.fail("PUT", fmt.Sprintf("%s/members/%d", g, outsider.ID), w.alice.Token, map[string]any{"access_token": "x"}, 403, 50025)
	var list []any
	e.ok("GET", g+"/emojis", w.bob.Token, nil, &list)
	e.ok("GET", g+"/stickers", w.bob.Token, nil, &list)
	if list == nil || len(list) != 0 {
		t.Fatalf("stickers = %v", list)
	}
	r = e.fail("POST", g+"/emojis", w.alice.Token, map[string]any{"name": "x", "image": "data:"}, 400, 50035)
	formPath(t, r, "image")
	e.fail("GET", g+"/emojis/123", w.bob.Token, nil, 404, 10014)
	e.fail("GET", v10+"/stickers/123", w.bob.Token, nil, 404, 10060)
}
