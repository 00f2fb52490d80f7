package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

const v10 = "/api/v10"

var timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$`)

// world is the newcomer scenario's guild: alice owns it, bob joined by
// invite; "staff" is hidden from @everyone, "readonly" denies sending.
type world struct {
	alice, bob               account
	guildID                  snowflake.ID
	general, staff, readonly snowflake.ID
	inviteCode               string
}

func (e *env) world() world {
	t := e.t
	t.Helper()
	var w world
	w.alice = e.register("alice", false)
	w.bob = e.register("bob", false)
	var g wire.Guild
	r := e.ok("POST", v10+"/guilds", w.alice.Token, map[string]any{"name": "Concord HQ"}, &g)
	if r.Status != 201 {
		t.Fatalf("create guild status %d", r.Status)
	}
	w.guildID = g.ID
	if len(g.Roles) != 1 || g.Roles[0].ID != g.ID || g.OwnerID != w.alice.ID {
		t.Fatalf("new guild = %+v", g)
	}
	var chans []wire.Channel
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/channels", v10, g.ID), w.alice.Token, nil, &chans)
	if len(chans) != 1 || *chans[0].Name != "general" {
		t.Fatalf("channels = %+v", chans)
	}
	w.general = chans[0].ID
	var staff, readonly wire.Channel
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, g.ID), w.alice.Token, map[string]any{
		"name": "staff", "type": 0,
		"permission_overwrites": []map[string]any{{"id": g.ID.String(), "type": 0, "allow": "0", "deny": strconv.FormatUint(uint64(permissions.ViewChannel), 10)}},
	}, &staff)
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, g.ID), w.alice.Token, map[string]any{
		"name": "readonly", "type": 0,
		"permission_overwrites": []map[string]any{{"id": uint64(g.ID), "type": 0, "deny": uint64(permissions.SendMessages)}},
	}, &readonly)
	w.staff, w.readonly = staff.ID, readonly.ID
	if len(staff.PermissionOverwrites) != 1 || staff.PermissionOverwrites[0].Deny != wire.Bits(permissions.ViewChannel) {
		t.Fatalf("staff overwrites = %+v", staff.PermissionOverwrites)
	}
	var inv wire.Invite
	e.ok("POST", fmt.Sprintf("%s/channels/%d/invites", v10, w.general), w.alice.Token, map[string]any{}, &inv)
	w.inviteCode = inv.Code
	var pub wire.Invite
	e.ok("GET", v10+"/invites/"+inv.Code, "", nil, &pub)
	if pub.Guild.ID != g.ID || pub.Guild.Name != "Concord HQ" || pub.Channel.ID != w.general {
		t.Fatalf("invite = %+v", pub)
	}
	e.ok("POST", v10+"/invites/"+inv.Code, w.bob.Token, map[string]any{}, nil)
	return w
}

func (e *env) post(token string, channel snowflake.ID, body map[string]any) wire.Message {
	e.t.Helper()
	var m wire.Message
	e.ok("POST", fmt.Sprintf("%s/channels/%d/messages", v10, channel), token, body, &m)
	return m
}

func TestNewcomerScenario(t *testing.T) {
	e := newEnv(t)
	w := e.world()

	var guilds []wire.PartialGuild
	e.ok("GET", v10+"/users/@me/guilds", w.bob.Token, nil, &guilds)
	if len(guilds) != 1 || guilds[0].ID != w.guildID || guilds[0].Owner {
		t.Fatalf("bob's guilds = %+v", guilds)
	}
	var me wire.User
	e.ok("GET", "/api/v9/users/@me", "Bearer "+strings.TrimPrefix(w.bob.Token, "Bot "), nil, &me)
	if me.ID != w.bob.ID || me.Username != e.name("bob") || me.Discriminator != "0" {
		t.Fatalf("me = %+v", me)
	}

	// bob's gateway session: it must get general's messages, never staff's.
	sess := e.subscribe("bob-1", w.bob.ID, 0)
	ds := e.waitFor(sess, "GUILD_CREATE", func(ds []delivery) bool { return len(ds) == 1 })
	if strings.Contains(string(ds[0].Payload), w.staff.String()) {
		t.Fatal("GUILD_CREATE shows the hidden channel")
	}

	// Hidden: every listing and read.
	var chans []wire.Channel
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID), w.bob.Token, nil, &chans)
	for _, c := range chans {
		if c.ID == w.staff {
			t.Fatal("bob lists the hidden channel")
		}
	}
	if len(chans) != 2 {
		t.Fatalf("bob sees %d channels", len(chans))
	}
	secret := e.post(w.alice.Token, w.staff, map[string]any{"content": "staff only"})
	e.fail("GET", fmt.Sprintf("%s/channels/%d", v10, w.staff), w.bob.Token, nil, 403, 50001)
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.staff), w.bob.Token, nil, 403, 50001)
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.staff, secret.ID), w.bob.Token, nil, 403, 50001)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.staff), w.bob.Token, map[string]any{"content": "hi"}, 403, 50001)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/typing", v10, w.staff), w.bob.Token, nil, 403, 50001)
	// The overwrite that denies sending gives 403 50013.
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.readonly), w.bob.Token, map[string]any{"content": "hi"}, 403, 50013)

	// Conversation and paging.
	const n = 60
	sent := make([]snowflake.ID, 0, n)
	for i := 0; i < n; i++ {
		tok := w.alice.Token
		if i%2 == 1 {
			tok = w.bob.Token
		}
		m := e.post(tok, w.general, map[string]any{"content": fmt.Sprintf("message %d", i)})
		if !timestampRE.MatchString(wire.Timestamp(m.Timestamp).String()) || m.EditedTimestamp != nil {
			t.Fatalf("timestamps of %+v", m)
		}
		sent = append(sent, m.ID)
	}
	var got []snowflake.ID
	before := ""
	for {
		var page []wire.Message
		e.ok("GET", fmt.Sprintf("%s/channels/%d/messages?limit=25%s", v10, w.general, before), w.bob.Token, nil, &page)
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			got = append(got, m.ID)
		}
		before = "&before=" + page[len(page)-1].ID.String()
	}
	slices.Reverse(got)
	if !slices.Equal(got, sent) {
		t.Fatalf("paged %d messages, sent %d; order or content differs", len(got), len(sent))
	}
	var after []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages?limit=5&after=%d", v10, w.general, sent[9]), w.bob.Token, nil, &after)
	if len(after) != 5 || after[4].ID != sent[10] || after[0].ID != sent[14] {
		t.Fatalf("after page = %v", after)
	}
	var around []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages?limit=3&around=%d", v10, w.general, sent[30]), w.bob.Token, nil, &around)
	if len(around) != 3 || around[1].ID != sent[30] {
		t.Fatalf("around page = %v", around)
	}

	// Live: bob's session got all n general messages and not the staff one.
	ds = e.waitFor(sess, "messages", func(ds []delivery) bool {
		c := 0
		for _, d := range ds {
			if d.Type == "MESSAGE_CREATE" {
				c++
			}
		}
		return c == n
	})
	for _, d := range ds {
		if strings.Contains(string(d.Payload), "staff only") {
			t.Fatal("hidden message delivered")
		}
	}

	// Raw shape of a message: ids as strings, arrays never null.
	r := e.call("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, sent[0]), w.bob.Token, nil)
	var raw map[string]any
	r.json(t, &raw)
	for _, k := range []string{"id", "channel_id", "guild_id"} {
		if _, ok := raw[k].(string); !ok {
			t.Errorf("%s is %T", k, raw[k])
		}
	}
	for _, k := range []string{"mentions", "mention_roles", "attachments", "embeds", "components"} {
		if _, ok := raw[k].([]any); !ok {
			t.Errorf("%s is %T, want array", k, raw[k])
		}
	}
	author := raw["author"].(map[string]any)
	if _, ok := author["public_flags"].(float64); !ok || author["discriminator"] != "0" {
		t.Errorf("author = %v", author)
	}
}

func TestErrorCodes(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	base := fmt.Sprintf("%s/channels/%d", v10, w.general)

	e.fail("GET", v10+"/users/@me", "", nil, 401, 40001)
	e.fail("GET", v10+"/users/@me", "Bot not.a.token", nil, 401, 40001)
	e.fail("GET", v10+"/channels/1", w.bob.Token, nil, 404, 10003)
	e.fail("GET", v10+"/channels/abc", w.bob.Token, nil, 404, 10003)
	e.fail("GET", v10+"/guilds/12345", w.bob.Token, nil, 404, 10004)
	e.fail("GET", fmt.Sprintf("%s/guilds/%d/members/1", v10, w.guildID), w.bob.Token, nil, 404, 10007)
	e.fail("GET", base+"/messages/1", w.bob.Token, nil, 404, 10008)
	e.fail("PATCH", fmt.Sprintf("%s/guilds/%d/roles/1", v10, w.guildID), w.alice.Token, map[string]any{"name": "x"}, 404, 10011)
	e.fail("GET", v10+"/users/1", w.bob.Token, nil, 404, 10013)
	e.fail("GET", v10+"/invites/nope", "", nil, 404, 10006)
	e.fail("POST", v10+"/invites/nope", w.bob.Token, nil, 404, 10006)
	e.fail("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.bob.Token, map[string]any{"name": "x"}, 403, 50013)
	e.fail("DELETE", fmt.Sprintf("%s/guilds/%d", v10, w.guildID), w.bob.Token, nil, 403, 50013)
	e.fail("DELETE", fmt.Sprintf("%s/guilds/%d/members/%d", v10, w.guildID, w.alice.ID), w.bob.Token, nil, 403, 50013)
	e.fail("PATCH", base, w.bob.Token, map[string]any{"name": "renamed"}, 403, 50013)

	// A stranger sees neither the guild nor its channels.
	carol := e.register("carol", false)
	e.fail("GET", fmt.Sprintf("%s/guilds/%d", v10, w.guildID), carol.Token, nil, 403, 50001)
	e.fail("GET", base+"/messages", carol.Token, nil, 403, 50001)

	// Bodies.
	e.fail("POST", base+"/messages", w.bob.Token, map[string]any{"content": ""}, 400, 50006)
	e.fail("POST", base+"/messages", w.bob.Token, map[string]any{"content": "   "}, 400, 50006)
	r := e.fail("POST", base+"/messages", w.bob.Token, map[string]any{"content": strings.Repeat("x", 2001)}, 400, 50035)
	var fe struct {
		Errors map[string]struct {
			Errors []struct{ Code, Message string } `json:"_errors"`
		} `json:"errors"`
	}
	r.json(t, &fe)
	if c := fe.Errors["content"].Errors; len(c) != 1 || c[0].Code != "BASE_TYPE_MAX_LENGTH" || c[0].Message != "Must be 2000 or fewer in length." {
		t.Fatalf("content error = %s", r.Body)
	}
	e.post(w.bob.Token, w.general, map[string]any{"content": strings.Repeat("é", 2000)})
	r = e.fail("POST", base+"/messages", w.bob.Token, map[string]any{"content": 5}, 400, 50035)
	if !strings.Contains(string(r.Body), `"content":{"_errors":[{"code":"BASE_TYPE_STRING"`) {
		t.Fatalf("wrong type error = %s", r.Body)
	}
	r = e.fail("POST", base+"/messages", w.bob.Token, map[string]any{"content": "hi", "message_reference": map[string]any{"message_id": "abc"}}, 400, 50035)
	if !strings.Contains(string(r.Body), `"message_reference":{"message_id":{"_errors":[{"code":"NUMBER_TYPE_COERCE"`) {
		t.Fatalf("bad snowflake error = %s", r.Body)
	}
	e.fail("POST", base+"/messages", w.bob.Token, `{"content":`, 400, 50035)
	e.fail("POST", base+"/messages", w.bob.Token, `[1,2]`, 400, 50035)
	big := `{"content":"hi","pad":"` + strings.Repeat("a", 1<<20) + `"}`
	e.fail("POST", base+"/messages", w.bob.Token, big, 400, 50035)
	e.fail("POST", base+"/messages", w.bob.Token, map[string]any{"content": "hi", "nonce": strings.Repeat("n", 26)}, 400, 50035)
	// Unknown fields are ignored (discordgo's edit sends extra keys).
	m := e.post(w.bob.Token, w.general, map[string]any{"content": "x", "ID": "1", "Channel": "2", "sticker_ids": []string{}})
	e.ok("PATCH", fmt.Sprintf("%s/messages/%d", base, m.ID), w.bob.Token, map[string]any{"content": "edited", "ID": m.ID, "Channel": w.general}, nil)
	e.fail("PATCH", fmt.Sprintf("%s/messages/%d", base, m.ID), w.alice.Token, map[string]any{"content": "hijack"}, 403, 50005)

	// Unknown route.
	r = e.call("GET", v10+"/no/such/route", w.bob.Token, nil)
	if r.Status != 404 || string(r.Body) != `{"code":0,"message":"404: Not Found"}` {
		t.Fatalf("unknown route: %d %s", r.Status, r.Body)
	}
}

func TestEditAndDelete(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	base := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	sess := e.subscribe("alice-1", w.alice.ID, 0)
	m := e.post(w.bob.Token, w.general, map[string]any{"content": "typo"})
	var edited wire.Message
	e.ok("PATCH", fmt.Sprintf("%s/%d", base, m.ID), w.bob.Token, map[string]any{"content": "fixed"}, &edited)
	if edited.Content != "fixed" || edited.EditedTimestamp == nil {
		t.Fatalf("edited = %+v", edited)
	}
	// bob may delete his own; alice (owner) may delete bob's; bob may not delete alice's.
	am := e.post(w.alice.Token, w.general, map[string]any{"content": "alice's"})
	e.fail("DELETE", fmt.Sprintf("%s/%d", base, am.ID), w.bob.Token, nil, 403, 50013)
	e.ok("DELETE", fmt.Sprintf("%s/%d", base, m.ID), w.alice.Token, nil, nil)
	e.fail("GET", fmt.Sprintf("%s/%d", base, m.ID), w.bob.Token, nil, 404, 10008)
	ds := e.waitFor(sess, "delete", func(ds []delivery) bool {
		return slices.ContainsFunc(ds, func(d delivery) bool { return d.Type == "MESSAGE_DELETE" })
	})
	var kinds []string
	for _, d := range ds[1:] {
		kinds = append(kinds, d.Type)
	}
	want := []string{"MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_CREATE", "MESSAGE_DELETE"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events = %v, want %v", kinds, want)
	}
	e.ok("POST", fmt.Sprintf("%s/channels/%d/typing", v10, w.general), w.bob.Token, nil, nil)
	e.waitFor(sess, "typing", func(ds []delivery) bool {
		return slices.ContainsFunc(ds, func(d delivery) bool { return d.Type == "TYPING_START" })
	})
}

func TestSlowmode429(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	var c wire.Channel
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, w.general), w.alice.Token, map[string]any{"rate_limit_per_user": 30}, &c)
	if c.RateLimitPerUser != 30 {
		t.Fatalf("rate_limit_per_user = %d", c.RateLimitPerUser)
	}
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	e.post(w.bob.Token, w.general, map[string]any{"content": "one"})
	r := e.call("POST", path, w.bob.Token, map[string]any{"content": "two"})
	if r.Status != 429 {
		t.Fatalf("second send: %d %s", r.Status, r.Body)
	}
	var body struct {
		RetryAfter float64 `json:"retry_after"`
		Global     *bool   `json:"global"`
		Message    string  `json:"message"`
	}
	r.json(t, &body)
	if body.RetryAfter <= 25 || body.RetryAfter > 30 || body.Global == nil || *body.Global {
		t.Fatalf("429 body = %s", r.Body)
	}
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 26 || ra > 30 || r.Header.Get("Via") == "" {
		t.Fatalf("429 headers = %v", r.Header)
	}
	// The owner skips slowmode.
	e.post(w.alice.Token, w.general, map[string]any{"content": "one"})
	e.post(w.alice.Token, w.general, map[string]any{"content": "two"})
	var page []wire.Message
	e.ok("GET", path, w.bob.Token, nil, &page)
	if len(page) != 3 {
		t.Fatalf("history has %d messages, want 3 (the 429 wrote nothing)", len(page))
	}
}

func TestEnforceNonce(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	a := e.post(w.bob.Token, w.general, map[string]any{"content": "once", "nonce": "abc-123", "enforce_nonce": true})
	b := e.post(w.bob.Token, w.general, map[string]any{"content": "once", "nonce": "abc-123", "enforce_nonce": true})
	if a.ID != b.ID || string(a.Nonce) != `"abc-123"` {
		t.Fatalf("enforced nonce: %d vs %d, nonce %s", a.ID, b.ID, a.Nonce)
	}
	// Another author with the same nonce is another message.
	c := e.post(w.alice.Token, w.general, map[string]any{"content": "once", "nonce": "abc-123", "enforce_nonce": true})
	// Without enforce_nonce the nonce is only echoed; integers stay integers.
	d := e.post(w.bob.Token, w.general, map[string]any{"content": "twice", "nonce": 42})
	f := e.post(w.bob.Token, w.general, map[string]any{"content": "twice", "nonce": 42})
	if c.ID == a.ID || d.ID == f.ID || string(d.Nonce) != "42" {
		t.Fatalf("ids %d %d %d %d, nonce %s", a.ID, c.ID, d.ID, f.ID, d.Nonce)
	}
	var page []wire.Message
	e.ok("GET", path, w.bob.Token, nil, &page)
	if len(page) != 4 {
		t.Fatalf("history has %d messages, want 4", len(page))
	}
}

func TestBulkDelete(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	var ids []snowflake.ID
	for i := 0; i < 5; i++ {
		ids = append(ids, e.post(w.bob.Token, w.general, map[string]any{"content": fmt.Sprint(i)}).ID)
	}
	e.fail("POST", path+"/bulk-delete", w.bob.Token, map[string]any{"messages": ids[:2]}, 403, 50013)
	e.fail("POST", path+"/bulk-delete", w.alice.Token, map[string]any{"messages": ids[:1]}, 400, 50035)
	old := snowflake.FromTime(time.Now().Add(-15 * 24 * time.Hour))
	e.fail("POST", path+"/bulk-delete", w.alice.Token, map[string]any{"messages": []snowflake.ID{ids[0], old}}, 400, 50034)
	// Duplicates fail the whole request (Discord's rule), deleting nothing;
	// so does a 101st id.
	r := e.fail("POST", path+"/bulk-delete", w.alice.Token, map[string]any{"messages": []snowflake.ID{ids[1], ids[3], ids[1]}}, 400, 50035)
	formPath(t, r, "messages")
	many := make([]snowflake.ID, 101)
	for i := range many {
		many[i] = ids[0] + snowflake.ID(i)
	}
	e.fail("POST", path+"/bulk-delete", w.alice.Token, map[string]any{"messages": many}, 400, 50035)
	e.ok("POST", path+"/bulk-delete", w.alice.Token, map[string]any{"messages": []snowflake.ID{ids[1], ids[3]}}, nil)
	var page []wire.Message
	e.ok("GET", path, w.bob.Token, nil, &page)
	var left []snowflake.ID
	for _, m := range page {
		left = append(left, m.ID)
	}
	if !slices.Equal(left, []snowflake.ID{ids[4], ids[2], ids[0]}) {
		t.Fatalf("left = %v", left)
	}
}

func TestReplies(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	q := e.post(w.alice.Token, w.general, map[string]any{"content": "question?"})
	a := e.post(w.bob.Token, w.general, map[string]any{"content": "answer", "message_reference": map[string]any{"message_id": q.ID.String()}})
	if a.Type != 19 || a.MessageReference == nil || a.MessageReference.MessageID != q.ID || a.ReferencedMessage == nil || a.ReferencedMessage.Content != "question?" {
		t.Fatalf("reply = %+v", a)
	}
	if len(a.Mentions) != 1 || a.Mentions[0].ID != w.alice.ID {
		t.Fatalf("reply mentions = %+v", a.Mentions)
	}
	quiet := e.post(w.bob.Token, w.general, map[string]any{"content": "quiet", "message_reference": map[string]any{"message_id": q.ID}, "allowed_mentions": map[string]any{"parse": []string{}}})
	if len(quiet.Mentions) != 0 {
		t.Fatalf("replied_user false still mentions: %+v", quiet.Mentions)
	}
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token,
		map[string]any{"content": "x", "message_reference": map[string]any{"message_id": "1"}}, 400, 50035)
	loose := e.post(w.bob.Token, w.general, map[string]any{"content": "x", "message_reference": map[string]any{"message_id": "1", "fail_if_not_exists": false}})
	if loose.Type != 0 || loose.MessageReference != nil {
		t.Fatalf("fail_if_not_exists false = %+v", loose)
	}
	var got wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, a.ID), w.bob.Token, nil, &got)
	if got.ReferencedMessage == nil || got.ReferencedMessage.ID != q.ID {
		t.Fatalf("history reply = %+v", got)
	}
}

func TestMentions(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	carol := e.register("carol", false)
	e.ok("POST", v10+"/invites/"+w.inviteCode, carol.Token, nil, nil)
	// @everyone may not mention everyone here.
	everyone := permissions.DefaultEveryone &^ permissions.MentionEveryone
	e.ok("PATCH", fmt.Sprintf("%s/guilds/%d/roles/%d", v10, w.guildID, w.guildID), w.alice.Token, map[string]any{"permissions": everyone.String()}, nil)
	var loud, quiet wire.Role
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.alice.Token, map[string]any{"name": "loud", "mentionable": true}, &loud)
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.alice.Token, map[string]any{"name": "quiet"}, &quiet)

	content := fmt.Sprintf("<@%d> <@!%d> <@&%d> <@&%d> @everyone", carol.ID, carol.ID, loud.ID, quiet.ID)
	m := e.post(w.bob.Token, w.general, map[string]any{"content": content})
	if m.MentionEveryone {
		t.Fatal("@everyone honoured without MENTION_EVERYONE (Discord sends the message but does not ping)")
	}
	if len(m.Mentions) != 1 || m.Mentions[0].ID != carol.ID || m.Mentions[0].Username != e.name("carol") {
		t.Fatalf("mentions = %+v", m.Mentions)
	}
	if !slices.Equal(m.MentionRoles, []snowflake.ID{loud.ID}) {
		t.Fatalf("mention_roles = %v", m.MentionRoles)
	}
	owner := e.post(w.alice.Token, w.general, map[string]any{"content": content})
	if !owner.MentionEveryone || len(owner.MentionRoles) != 2 {
		t.Fatalf("owner's mentions: everyone %v roles %v", owner.MentionEveryone, owner.MentionRoles)
	}
	none := e.post(w.alice.Token, w.general, map[string]any{"content": content, "allowed_mentions": map[string]any{"parse": []string{}}})
	if none.MentionEveryone || len(none.Mentions) != 0 || len(none.MentionRoles) != 0 {
		t.Fatalf("allowed_mentions parse [] = %+v", none)
	}
	some := e.post(w.alice.Token, w.general, map[string]any{"content": content, "allowed_mentions": map[string]any{"users": []string{carol.ID.String()}}})
	if len(some.Mentions) != 1 || len(some.MentionRoles) != 0 || some.MentionEveryone {
		t.Fatalf("allowed_mentions users = %+v", some)
	}
	// In the hidden channel, a mention of carol (who cannot see it) is no mention.
	hidden := e.post(w.alice.Token, w.staff, map[string]any{"content": fmt.Sprintf("<@%d>", carol.ID)})
	if len(hidden.Mentions) != 0 {
		t.Fatalf("hidden channel mention leaked: %+v", hidden.Mentions)
	}
}

func TestMembersRolesAndKick(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	var role wire.Role
	e.ok("POST", g+"/roles", w.alice.Token, map[string]any{"name": "staff", "permissions": uint64(permissions.ViewChannel)}, &role)
	// Grant staff access, then give bob the role: he now sees the channel.
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.staff, role.ID), w.alice.Token, map[string]any{"type": 0, "allow": "1024"}, nil)
	e.ok("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, w.bob.ID, role.ID), w.alice.Token, nil, nil)
	e.ok("GET", fmt.Sprintf("%s/channels/%d", v10, w.staff), w.bob.Token, nil, nil)
	var mem wire.Member
	e.ok("GET", fmt.Sprintf("%s/members/%d", g, w.bob.ID), w.bob.Token, nil, &mem)
	if !slices.Equal(mem.Roles, []snowflake.ID{role.ID}) || mem.User == nil || mem.User.ID != w.bob.ID {
		t.Fatalf("member = %+v", mem)
	}
	e.ok("DELETE", fmt.Sprintf("%s/members/%d/roles/%d", g, w.bob.ID, role.ID), w.alice.Token, nil, nil)
	e.fail("GET", fmt.Sprintf("%s/channels/%d", v10, w.staff), w.bob.Token, nil, 403, 50001)

	var list []wire.Member
	e.ok("GET", g+"/members?limit=10", w.bob.Token, nil, &list)
	if len(list) != 2 {
		t.Fatalf("members = %d", len(list))
	}
	e.ok("GET", fmt.Sprintf("%s/members?limit=10&after=%d", g, list[0].User.ID), w.bob.Token, nil, &list)
	if len(list) != 1 {
		t.Fatalf("members after = %d", len(list))
	}
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	e.ok("PATCH", fmt.Sprintf("%s/members/%d", g, w.bob.ID), w.alice.Token, map[string]any{"nick": "bobby", "communication_disabled_until": until}, &mem)
	if mem.Nick == nil || *mem.Nick != "bobby" || mem.CommunicationDisabledUntil == nil {
		t.Fatalf("patched member = %+v", mem)
	}
	// A timed-out member reads but cannot send.
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token, map[string]any{"content": "hi"}, 403, 50013)
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token, nil, nil)
	e.ok("PATCH", fmt.Sprintf("%s/members/%d", g, w.bob.ID), w.alice.Token, map[string]any{"communication_disabled_until": nil}, &mem)
	if mem.CommunicationDisabledUntil != nil {
		t.Fatal("timeout not cleared")
	}
	e.post(w.bob.Token, w.general, map[string]any{"content": "back"})

	e.ok("DELETE", fmt.Sprintf("%s/members/%d", g, w.bob.ID), w.alice.Token, nil, nil)
	e.fail("GET", g, w.bob.Token, nil, 403, 50001)
	e.fail("GET", fmt.Sprintf("%s/members/%d", g, w.bob.ID), w.alice.Token, nil, 404, 10007)
	var guilds []wire.PartialGuild
	e.ok("GET", v10+"/users/@me/guilds", w.bob.Token, nil, &guilds)
	if len(guilds) != 0 {
		t.Fatalf("kicked bob still lists %v", guilds)
	}
}

func TestDirectMessages(t *testing.T) {
	e := newEnv(t)
	w := e.world() // alice and bob share a guild; carol joins it
	alice, bob := w.alice, w.bob
	carol := e.register("carol", false)
	e.ok("POST", v10+"/invites/"+w.inviteCode, carol.Token, map[string]any{}, nil)
	var dm, again wire.Channel
	e.ok("POST", v10+"/users/@me/channels", alice.Token, map[string]any{"recipient_id": bob.ID.String()}, &dm)
	e.ok("POST", v10+"/users/@me/channels", bob.Token, map[string]any{"recipient_id": alice.ID}, &again)
	if dm.Type != 1 || dm.ID != again.ID || dm.Recipients == nil || len(*dm.Recipients) != 1 || (*dm.Recipients)[0].ID != bob.ID {
		t.Fatalf("dm = %+v, again = %+v", dm, again)
	}
	m := e.post(alice.Token, dm.ID, map[string]any{"content": "psst"})
	if m.GuildID != 0 || m.Member != nil {
		t.Fatalf("dm message = %+v", m)
	}
	var page []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, dm.ID), bob.Token, nil, &page)
	if len(page) != 1 {
		t.Fatalf("bob's dm history = %v", page)
	}
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages", v10, dm.ID), carol.Token, nil, 403, 50001)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, dm.ID), carol.Token, map[string]any{"content": "x"}, 403, 50001)
	var group wire.Channel
	e.ok("POST", v10+"/users/@me/channels", alice.Token, map[string]any{"recipients": []string{bob.ID.String(), carol.ID.String()}}, &group)
	if group.Type != 3 || group.Recipients == nil || len(*group.Recipients) != 2 || group.OwnerID != alice.ID {
		t.Fatalf("group = %+v", group)
	}
	e.post(carol.Token, group.ID, map[string]any{"content": "hi all"})
	e.fail("POST", v10+"/users/@me/channels", alice.Token, map[string]any{"recipient_id": "1"}, 404, 10013)
}

func TestAccountsAndGateway(t *testing.T) {
	e := newEnv(t)
	a := e.register("dave", false)
	e.fail("POST", v10+"/auth/register", "", map[string]any{"username": e.name("dave"), "password": "password123"}, 400, 50035)
	e.fail("POST", v10+"/auth/register", "", map[string]any{"username": "x", "password": "password123"}, 400, 50035)
	e.fail("POST", v10+"/auth/login", "", map[string]any{"username": e.name("dave"), "password": "wrong-password"}, 400, 50035)
	var login struct {
		Token string `json:"token"`
	}
	e.ok("POST", v10+"/auth/login", "", map[string]any{"username": e.name("dave"), "password": "password123"}, &login)
	var me wire.User
	e.ok("GET", v10+"/users/@me", login.Token, nil, &me)
	if me.ID != a.ID {
		t.Fatalf("login token is for %d", me.ID)
	}
	var gw map[string]any
	e.ok("GET", "/api/v9/gateway", "", nil, &gw)
	host := strings.TrimPrefix(e.url, "http://")
	if gw["url"] != "ws://"+host+"/gateway" {
		t.Fatalf("gateway = %v", gw)
	}
	// GET /gateway/bot is the api role's (apirole.GatewayBot, which
	// counts identifies), served in front of this handler in dev and in
	// serve: only a topology shows it here.
	if e.srv != nil {
		return
	}
	var bot struct {
		URL               string `json:"url"`
		Shards            int    `json:"shards"`
		SessionStartLimit struct {
			Total          int `json:"total"`
			Remaining      int `json:"remaining"`
			ResetAfter     int `json:"reset_after"`
			MaxConcurrency int `json:"max_concurrency"`
		} `json:"session_start_limit"`
	}
	e.ok("GET", v10+"/gateway/bot", a.Token, nil, &bot)
	if bot.Shards != 1 || bot.SessionStartLimit.Remaining < 1 || bot.SessionStartLimit.MaxConcurrency != 1 {
		t.Fatalf("gateway/bot = %+v", bot)
	}
	e.fail("GET", v10+"/gateway/bot", "", nil, 401, 40001)
}

func TestStoreFailureIs503(t *testing.T) {
	e := newEnv(t)
	e.inProcess("it closes the store under the handler")
	w := e.world()
	// Closing the store makes every write fail: a send must not answer 200.
	e.store.Close()
	r := e.call("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.alice.Token, map[string]any{"content": "lost?"})
	if r.Status != 503 {
		t.Fatalf("send with a dead store: %d %s", r.Status, r.Body)
	}
	if r.code(t) != 0 {
		t.Fatalf("503 body = %s", r.Body)
	}
}

func TestInvitesCategoriesAndGuildEdits(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	var cat, child wire.Channel
	r := e.ok("POST", g+"/channels", w.alice.Token, map[string]any{"name": "Text", "type": 4}, &cat)
	if r.Status != 201 || cat.Type != 4 {
		t.Fatalf("category = %d %+v", r.Status, cat)
	}
	e.ok("POST", g+"/channels", w.alice.Token, map[string]any{"name": "child", "type": 0, "parent_id": cat.ID.String()}, &child)
	if child.ParentID == nil || *child.ParentID != cat.ID {
		t.Fatalf("child parent = %v", child.ParentID)
	}
	e.fail("POST", g+"/channels", w.alice.Token, map[string]any{"name": "bad", "type": 0, "parent_id": w.general.String()}, 400, 50035)
	e.fail("POST", g+"/channels", w.alice.Token, map[string]any{"name": "bad", "type": 13}, 400, 50035)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, cat.ID), w.alice.Token, map[string]any{"content": "x"}, 400, 50008)
	var deleted wire.Channel
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d", v10, cat.ID), w.alice.Token, nil, &deleted)
	e.ok("GET", fmt.Sprintf("%s/channels/%d", v10, child.ID), w.alice.Token, nil, &child)
	if deleted.ID != cat.ID || child.ParentID != nil {
		t.Fatalf("after deleting the category: %+v, child parent %v", deleted, child.ParentID)
	}
	e.fail("GET", fmt.Sprintf("%s/channels/%d", v10, cat.ID), w.alice.Token, nil, 404, 10003)

	// A one-use invite admits one new member.
	var inv wire.Invite
	e.ok("POST", fmt.Sprintf("%s/channels/%d/invites", v10, w.general), w.alice.Token, map[string]any{"max_uses": 1, "max_age": 0}, &inv)
	carol := e.register("carol", false)
	dave := e.register("dave", false)
	e.ok("POST", v10+"/invites/"+inv.Code, carol.Token, nil, nil)
	e.fail("POST", v10+"/invites/"+inv.Code, dave.Token, nil, 404, 10006)
	// bob (no MANAGE_CHANNELS/MANAGE_GUILD) cannot delete invites; alice can.
	e.fail("DELETE", v10+"/invites/"+w.inviteCode, w.bob.Token, nil, 403, 50013)
	e.ok("DELETE", v10+"/invites/"+w.inviteCode, w.alice.Token, nil, nil)
	e.fail("GET", v10+"/invites/"+w.inviteCode, "", nil, 404, 10006)

	var edited wire.Guild
	e.ok("PATCH", g, w.alice.Token, map[string]any{"name": "Renamed", "description": "about"}, &edited)
	if edited.Name != "Renamed" || edited.Description == nil || *edited.Description != "about" {
		t.Fatalf("edited guild = %+v", edited)
	}
	var counted struct {
		Name  string `json:"name"`
		Count int    `json:"approximate_member_count"`
	}
	e.ok("GET", g+"?with_counts=true", w.bob.Token, nil, &counted)
	if counted.Name != "Renamed" || counted.Count != 3 {
		t.Fatalf("guild with counts = %+v", counted)
	}
	e.fail("PATCH", g, w.bob.Token, map[string]any{"name": "Mine"}, 403, 50013)
	e.ok("DELETE", g, w.alice.Token, nil, nil)
	e.fail("GET", g, w.alice.Token, nil, 404, 10004)
}

func TestHistoryWithoutReadMessageHistory(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	m := e.post(w.alice.Token, w.general, map[string]any{"content": "old news"})
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.general, w.guildID), w.alice.Token,
		map[string]any{"type": 0, "deny": strconv.FormatUint(uint64(permissions.ReadMessageHistory), 10)}, nil)
	// Discord: the channel is visible, but history is empty and single reads are refused.
	var page []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token, nil, &page)
	if page == nil || len(page) != 0 {
		t.Fatalf("history without READ_MESSAGE_HISTORY = %v", page)
	}
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.bob.Token, nil, 403, 50013)
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.alice.Token, nil, &page)
	if len(page) != 1 {
		t.Fatalf("owner history = %v", page)
	}
	// Sending still works.
	e.post(w.bob.Token, w.general, map[string]any{"content": "new"})
}

func TestMultipartMessage(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	body := "--XyZ\r\nContent-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json\r\n\r\n" +
		`{"content":"with a file"}` + "\r\n--XyZ\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"a.txt\"\r\n\r\nhello\r\n--XyZ--\r\n"
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s%s/channels/%d/messages", e.url, v10, w.general), strings.NewReader(body))
	req.Header.Set("Authorization", w.bob.Token)
	req.Header.Set("Content-Type", "multipart/form-data; boundary=XyZ")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m wire.Message
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != 200 || m.Content != "with a file" {
		t.Fatalf("multipart send: %d %+v %v", res.StatusCode, m, err)
	}
}

func TestEnforceNonceConcurrent(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	const n = 8
	ids := make(chan snowflake.ID, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids <- e.post(w.bob.Token, w.general, map[string]any{"content": "racy", "nonce": 7, "enforce_nonce": true}).ID
		}()
	}
	wg.Wait()
	close(ids)
	var first snowflake.ID
	for id := range ids {
		if first == 0 {
			first = id
		}
		if id != first {
			t.Fatalf("concurrent enforce_nonce sends made %d and %d", first, id)
		}
	}
	var page []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token, nil, &page)
	if len(page) != 1 {
		t.Fatalf("%d messages stored", len(page))
	}
}

func TestRevokedTokenIs401(t *testing.T) {
	e := newEnv(t)
	e.inProcess("it revokes the token through the process's token issuer")
	a := e.register("erin", false)
	e.ok("GET", v10+"/users/@me", a.Token, nil, nil)
	if err := e.auth.Revoke(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	e.fail("GET", v10+"/users/@me", a.Token, nil, 401, 40001)
}
