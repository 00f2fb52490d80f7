package bots_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

func callbackPath(id snowflake.ID, token string) string {
	return fmt.Sprintf("/api/v10/interactions/%d/%s/callback", id, token)
}

func TestGatewayInteractionRespond(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Responder")
	e.install(a, permissions.ViewChannel|permissions.SendMessages)
	e.dispatch.online[a.BotID] = true
	cmd := e.command(a, "ping")
	id, token := e.invoke(a, cmd)

	d := e.dispatch.deliveries()
	last := d[len(d)-1]
	if last.UserID != a.BotID || last.GuildID != guildID {
		t.Fatalf("INTERACTION_CREATE went to user %d guild %d", last.UserID, last.GuildID)
	}
	var p map[string]any
	if err := json.Unmarshal(last.Payload, &p); err != nil {
		t.Fatal(err)
	}
	member := p["member"].(map[string]any)
	if p["type"].(float64) != 2 || p["application_id"] != a.ID.String() || p["channel_id"] != channelID.String() ||
		p["guild_id"] != guildID.String() || p["version"].(float64) != 1 ||
		p["app_permissions"] != (permissions.ViewChannel|permissions.SendMessages).String() ||
		member["user"].(map[string]any)["id"] != e.memberID.String() || member["permissions"] == nil ||
		p["data"].(map[string]any)["name"] != "ping" || p["data"].(map[string]any)["id"] != cmd.String() {
		t.Fatalf("interaction payload = %s", last.Payload)
	}
	if e.counter("concord_bots_interaction_deliveries_total", map[string]string{"path": "gateway", "result": "ok"}) != 1 {
		t.Fatal("gateway delivery not counted")
	}

	r := e.expect(e.do("POST", callbackPath(id, token)+"?with_response=true", "",
		map[string]any{"type": 4, "data": map[string]any{"content": "pong"}}), 200, 0)
	ix := r["interaction"].(map[string]any)
	res := r["resource"].(map[string]any)
	msg := res["message"].(map[string]any)
	if ix["id"] != id.String() || ix["type"].(float64) != 2 || ix["response_message_id"] != msg["id"] ||
		ix["response_message_loading"] != false || ix["response_message_ephemeral"] != false || res["type"].(float64) != 4 {
		t.Fatalf("with_response = %s", r)
	}
	created := e.messages.created()
	if len(created) != 1 || created[0].Content != "pong" || created[0].AuthorID != a.BotID ||
		created[0].ChannelID != channelID || created[0].Type != bots.MessageTypeChatInputCommand || created[0].EphemeralTo != 0 {
		t.Fatalf("messages = %+v", created)
	}

	// A second callback is refused; the timer was stopped.
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 4, "data": map[string]any{"content": "again"}}), 400, 40060)
	if e.clock.pending() != 0 {
		t.Fatal("the acknowledgement timer is still armed")
	}
	e.clock.Advance(5 * time.Second)
	if len(e.messages.created()) != 1 || e.counter("concord_bots_interaction_misses_total", nil) != 0 {
		t.Fatal("an acknowledged interaction timed out")
	}
}

func TestAckTimeoutShowsFailure(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Sleepy")
	e.install(a, permissions.SendMessages)
	id, token := e.invoke(a, e.command(a, "slow"))

	e.clock.Advance(2999 * time.Millisecond)
	if len(e.messages.created()) != 0 {
		t.Fatal("failure shown before the deadline")
	}
	e.clock.Advance(time.Millisecond)
	created := e.messages.created()
	if len(created) != 1 {
		t.Fatalf("messages after the deadline: %+v", created)
	}
	f := created[0]
	if f.Content != bots.FailureMessage || f.Flags != bots.MessageFlagEphemeral || f.EphemeralTo != e.memberID || f.InteractionID != id {
		t.Fatalf("failure message = %+v", f)
	}
	if got := e.counter("concord_bots_interaction_misses_total", map[string]string{"application_id": a.ID.String()}); got != 1 {
		t.Fatalf("misses = %v, want 1", got)
	}
	// The bot answers too late.
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 4, "data": map[string]any{"content": "late"}}), 404, 10062)
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/webhooks/%d/%s", a.ID, token), "", map[string]any{"content": "late"}), 404, 10015)
}

// TestCallbackAfterWindowBeforeTimer: the deadline is checked on the
// clock too, not only by the timer.
func TestCallbackAfterWindowBeforeTimer(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Edge")
	e.install(a, 0)
	id, token := e.invoke(a, e.command(a, "edge"))
	e.clock.mu.Lock()
	e.clock.now = e.clock.now.Add(3 * time.Second) // time passes; the timer has not run yet
	e.clock.mu.Unlock()
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 4, "data": map[string]any{"content": "x"}}), 404, 10062)
}

func TestDeferAndFollowups(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Deferrer")
	e.install(a, 0)
	id, token := e.invoke(a, e.command(a, "long"))
	hook := fmt.Sprintf("/api/v10/webhooks/%d/%s", a.ID, token)

	e.expect(e.do("POST", hook, "", map[string]any{"content": "too soon"}), 404, 10015)
	r := e.do("POST", callbackPath(id, token), "", map[string]any{"type": 5, "data": map[string]any{"flags": 64}})
	if r.Status != 204 {
		t.Fatalf("defer: %d %s", r.Status, r.Body)
	}
	loading := e.messages.created()[0]
	if loading.Flags != bots.MessageFlagLoading|bots.MessageFlagEphemeral || loading.EphemeralTo != e.memberID {
		t.Fatalf("deferred message = %+v", loading)
	}
	// Deferred past the 3 s window: no failure.
	e.clock.Advance(10 * time.Minute)
	if len(e.messages.created()) != 1 {
		t.Fatal("a deferred interaction timed out")
	}

	// The first followup fills the loading message.
	orig := e.expect(e.do("POST", hook+"?wait=true", "", map[string]any{"content": "done"}), 200, 0)
	if orig["content"] != "done" || orig["flags"].(float64) != bots.MessageFlagEphemeral {
		t.Fatalf("filled original = %v", orig)
	}
	g := e.expect(e.do("GET", hook+"/messages/@original", "", nil), 200, 0)
	if g["id"] != orig["id"] || g["content"] != "done" {
		t.Fatalf("@original = %v", g)
	}
	// The next one is a new message.
	f := e.expect(e.do("POST", hook+"?wait=true", "", map[string]any{"content": "more"}), 200, 0)
	if f["id"] == orig["id"] {
		t.Fatal("second followup edited the original")
	}
	// Without ?wait=true the followup still answers with its message.
	if nw := e.expect(e.do("POST", hook, "", map[string]any{"content": "no wait"}), 200, 0); nw["content"] != "no wait" {
		t.Fatalf("followup without wait = %v", nw)
	}
	e.expect(e.do("PATCH", hook+"/messages/@original", "", map[string]any{"content": "edited"}), 200, 0)
	e.expect(e.do("GET", hook+"/messages/"+f["id"].(string), "", nil), 200, 0)
	e.expect(e.do("DELETE", hook+"/messages/"+f["id"].(string), "", nil), 204, 0)
	// A message that is not this interaction's is unknown to its token.
	other, _ := e.messages.CreateMessage(t.Context(), bots.NewMessage{ChannelID: channelID, Content: "someone else's"})
	e.expect(e.do("GET", hook+"/messages/"+other.ID.String(), "", nil), 404, 10008)
	e.expect(e.do("PATCH", hook+"/messages/"+other.ID.String(), "", map[string]any{"content": "hijack"}), 404, 10008)
	e.expect(e.do("POST", hook, "", map[string]any{"content": ""}), 400, 50006)

	// Fifteen minutes after the interaction the token is dead.
	e.clock.Advance(5 * time.Minute)
	e.expect(e.do("POST", hook, "", map[string]any{"content": "expired"}), 401, 50027)
	e.expect(e.do("PATCH", hook+"/messages/@original", "", map[string]any{"content": "expired"}), 401, 50027)
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 4, "data": map[string]any{"content": "x"}}), 404, 10062)
}

func TestForgedAndReplayedTokens(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Tokens")
	b := e.createApp("Other")
	e.install(a, 0)
	cmd := e.command(a, "one")
	idA, tokA := e.invoke(a, cmd)
	idB, tokB := e.invoke(a, cmd)
	body := map[string]any{"type": 4, "data": map[string]any{"content": "x"}}

	// A's token on B's interaction, a tampered token, garbage.
	e.expect(e.do("POST", callbackPath(idB, tokA), "", body), 404, 10062)
	tampered := tokA[:len(tokA)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tokA, "AA")]
	e.expect(e.do("POST", callbackPath(idA, tampered), "", body), 404, 10062)
	e.expect(e.do("POST", callbackPath(idA, "garbage"), "", body), 404, 10062)
	e.expect(e.do("POST", callbackPath(12345, tokA), "", body), 404, 10062)

	// The genuine callback works once; replaying it is 40060.
	e.expect(e.do("POST", callbackPath(idA, tokA), "", body), 204, 0)
	e.expect(e.do("POST", callbackPath(idA, tokA), "", body), 400, 40060)

	// Followups: another application's id, a forged token.
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/webhooks/%d/%s", b.ID, tokA), "", map[string]any{"content": "x"}), 401, 50027)
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/webhooks/%d/%s", a.ID, tampered), "", map[string]any{"content": "x"}), 401, 50027)
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/webhooks/%d/%s", a.ID, "x.y"), "", map[string]any{"content": "x"}), 401, 50027)
	_ = tokB
}

func TestCallbackValidation(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Strict")
	e.install(a, 0)
	id, token := e.invoke(a, e.command(a, "v"))
	for _, tc := range []struct {
		body         any
		status, code int
	}{
		{map[string]any{"type": 8, "data": map[string]any{"choices": []any{}}}, 400, 50035},
		{map[string]any{"type": 1}, 400, 50035},
		{map[string]any{"type": 6}, 400, 50035},
		{map[string]any{"type": 4, "data": map[string]any{"content": ""}}, 400, 50006},
		{map[string]any{"type": 4, "data": map[string]any{"content": strings.Repeat("x", 2001)}}, 400, 50035},
		{map[string]any{"type": 4, "data": map[string]any{"content": "x", "flags": 1 << 3}}, 400, 50035},
		{map[string]any{"type": 9, "data": map[string]any{"custom_id": "m", "title": "", "components": []any{map[string]any{}}}}, 400, 50035},
		{`{"type": "four"}`, 400, 50035},
	} {
		e.expect(e.do("POST", callbackPath(id, token), "", tc.body), tc.status, tc.code)
	}
	// Refused bodies did not acknowledge: a valid one still works.
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 4, "data": map[string]any{"content": "ok"}}), 204, 0)
}

func TestModalAndAutocomplete(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Forms")
	e.install(a, 0)
	cmd := e.command(a, "form")
	id, token := e.invoke(a, cmd)
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 9, "data": map[string]any{
		"custom_id": "m1", "title": "Tell me", "components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 4, "custom_id": "why", "style": 2, "label": "Why?"},
		}}},
	}}), 204, 0)
	d := e.dispatch.deliveries()
	if last := d[len(d)-1]; last.Type != "INTERACTION_MODAL_CREATE" || last.UserID != e.memberID {
		t.Fatalf("modal went to %+v", last)
	}

	// Autocomplete interactions accept only type 8.
	e.expect(e.do("POST", "/api/v10/interactions", e.member, map[string]any{
		"type": 4, "application_id": a.ID.String(), "channel_id": channelID.String(),
		"data": map[string]any{"id": cmd.String()},
	}), 204, 0)
	d = e.dispatch.deliveries()
	var p struct {
		ID    snowflake.ID `json:"id"`
		Token string       `json:"token"`
	}
	_ = json.Unmarshal(d[len(d)-1].Payload, &p)
	e.expect(e.do("POST", callbackPath(p.ID, p.Token), "", map[string]any{"type": 4, "data": map[string]any{"content": "x"}}), 400, 50035)
	e.expect(e.do("POST", callbackPath(p.ID, p.Token), "", map[string]any{"type": 8, "data": map[string]any{"choices": []any{map[string]any{"name": "a", "value": "a"}}}}), 204, 0)
	d = e.dispatch.deliveries()
	if last := d[len(d)-1]; last.Type != "APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE" || last.UserID != e.memberID {
		t.Fatalf("autocomplete result went to %+v", last)
	}
}

func TestComponentInteractionUpdatesMessage(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Buttons")
	e.install(a, 0)
	row := []json.RawMessage{json.RawMessage(`{"type":1,"components":[{"type":2,"style":1,"custom_id":"btn","label":"Press"},` +
		`{"type":2,"style":2,"custom_id":"off","label":"Off","disabled":true}]}`)}
	botMsg, _ := e.messages.CreateMessage(t.Context(), bots.NewMessage{ChannelID: channelID, AuthorID: a.BotID, Content: "press", Components: row})
	userMsg, _ := e.messages.CreateMessage(t.Context(), bots.NewMessage{ChannelID: channelID, AuthorID: e.memberID, Content: "mine", Components: row})
	invokeID := func(msg snowflake.ID, customID string, typ int) response {
		return e.do("POST", "/api/v10/interactions", e.member, map[string]any{
			"type": 3, "application_id": a.ID.String(), "channel_id": channelID.String(), "message_id": msg.String(),
			"data": map[string]any{"custom_id": customID, "component_type": typ},
		})
	}
	invoke := func(msg snowflake.ID) response { return invokeID(msg, "btn", 2) }
	e.expect(invoke(userMsg.ID), 404, 10008)
	// Clicks on buttons the message never showed, of the wrong type or
	// disabled are refused.
	e.expect(invokeID(botMsg.ID, "forged", 2), 400, 50035)
	e.expect(invokeID(botMsg.ID, "btn", 3), 400, 50035)
	e.expect(invokeID(botMsg.ID, "off", 2), 400, 50035)
	e.expect(invoke(botMsg.ID), 204, 0)
	d := e.dispatch.deliveries()
	var p struct {
		ID      snowflake.ID   `json:"id"`
		Token   string         `json:"token"`
		Message map[string]any `json:"message"`
	}
	_ = json.Unmarshal(d[len(d)-1].Payload, &p)
	if p.Message["id"] != botMsg.ID.String() {
		t.Fatalf("component interaction lacks its message: %s", d[len(d)-1].Payload)
	}
	r := e.expect(e.do("POST", callbackPath(p.ID, p.Token)+"?with_response=true", "", map[string]any{"type": 7, "data": map[string]any{"content": "pressed"}}), 200, 0)
	if r["interaction"].(map[string]any)["response_message_id"] != botMsg.ID.String() {
		t.Fatalf("with_response = %v", r)
	}
	if m, _ := e.messages.GetMessage(t.Context(), channelID, botMsg.ID); m.Content != "pressed" {
		t.Fatalf("message not updated: %q", m.Content)
	}
}

func TestInvokeRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Picky")
	cmd := e.command(a, "go")
	body := func(kv ...any) map[string]any {
		m := map[string]any{"type": 2, "application_id": a.ID.String(), "channel_id": channelID.String(),
			"data": map[string]any{"id": cmd.String()}}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	// Not installed yet.
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body()), 403, 50001)
	e.install(a, permissions.SendMessages)
	e.expect(e.do("POST", "/api/v10/interactions", a.Token, body()), 403, 20001)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("channel_id", otherChan.String())), 404, 10007)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("channel_id", "424242")), 404, 10003)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("application_id", "1")), 404, 10002)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("data", map[string]any{"id": "99"})), 404, 10063)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("type", 1)), 400, 50035)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("guild_id", otherGild.String())), 400, 50035)

	// USE_APPLICATION_COMMANDS is checked now, on every call.
	_, weak := e.user("weak", permissions.ViewChannel|permissions.SendMessages)
	e.expect(e.do("POST", "/api/v10/interactions", weak, body()), 403, 50013)

	// default_member_permissions and required options.
	m := e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/commands", a.ID), a.Token, map[string]any{
		"name": "mod", "description": "d", "default_member_permissions": permissions.ManageGuild.String(),
		"options": []any{map[string]any{"type": 3, "name": "why", "description": "d", "required": true}},
	}), 201, 0)
	mod := m["id"].(string)
	opts := []any{map[string]any{"type": 3, "name": "why", "value": "because"}}
	e.expect(e.do("POST", "/api/v10/interactions", e.member, body("data", map[string]any{"id": mod, "options": opts})), 403, 50013)
	e.expect(e.do("POST", "/api/v10/interactions", e.admin, body("data", map[string]any{"id": mod})), 400, 50035)
	e.expect(e.do("POST", "/api/v10/interactions", e.admin, body("data", map[string]any{"id": mod, "options": []any{map[string]any{"type": 4, "name": "why", "value": 1}}})), 400, 50035)
	e.expect(e.do("POST", "/api/v10/interactions", e.admin, body("data", map[string]any{"id": mod, "options": opts})), 204, 0)
}

// TestGrantChangesTakeEffectOnNextCall narrows the bot's permissions and
// then removes it: the next interaction carries the narrowed bits, and
// after removal the next one is refused.
func TestGrantChangesTakeEffectOnNextCall(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Narrowed")
	all := permissions.ViewChannel | permissions.SendMessages
	e.install(a, all)
	if got := e.guilds.installs; len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("with %d", all)) {
		t.Fatalf("InstallBot calls = %v", got)
	}
	cmd := e.command(a, "x")
	appPerms := func() string {
		e.invoke(a, cmd)
		d := e.dispatch.deliveries()
		var p struct {
			AppPermissions string `json:"app_permissions"`
		}
		_ = json.Unmarshal(d[len(d)-1].Payload, &p)
		return p.AppPermissions
	}
	if got := appPerms(); got != all.String() {
		t.Fatalf("app_permissions = %s, want %s", got, all)
	}
	e.guilds.setPerms(guildID, a.BotID, permissions.ViewChannel)
	if got := appPerms(); got != permissions.ViewChannel.String() {
		t.Fatalf("after narrowing app_permissions = %s", got)
	}
	// A member without MANAGE_GUILD cannot remove it; the admin can.
	e.expect(e.do("DELETE", fmt.Sprintf("/api/v10/guilds/%d/integrations/%d", guildID, a.ID), e.member, nil), 403, 50013)
	e.expect(e.do("DELETE", fmt.Sprintf("/api/v10/guilds/%d/integrations/%d", guildID, a.ID), e.admin, nil), 204, 0)
	e.expect(e.do("POST", "/api/v10/interactions", e.member, map[string]any{
		"type": 2, "application_id": a.ID.String(), "channel_id": channelID.String(), "data": map[string]any{"id": cmd.String()},
	}), 403, 50001)
	if got := e.guilds.installs; got[len(got)-1] != fmt.Sprintf("uninstall %d from %d", a.BotID, guildID) {
		t.Fatalf("UninstallBot not called: %v", got)
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Installable")
	path := fmt.Sprintf("/api/v10/oauth2/authorize?client_id=%d&scope=bot", a.ID)
	ok := map[string]any{"guild_id": guildID.String(), "permissions": "2048", "authorize": true}
	e.expect(e.do("POST", path, e.member, ok), 403, 50013)
	e.expect(e.do("POST", path, e.admin, map[string]any{"guild_id": guildID.String(), "permissions": permissions.Administrator.String(), "authorize": true}), 403, 50013)
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/oauth2/authorize?client_id=%d&scope=identify", a.ID), e.admin, ok), 400, 50035)
	e.expect(e.do("POST", "/api/v10/oauth2/authorize?client_id=1&scope=bot", e.admin, ok), 404, 10002)
	e.expect(e.do("POST", path, e.admin, map[string]any{"permissions": "0", "authorize": true}), 400, 50035)
	e.expect(e.do("POST", path, e.admin, map[string]any{"guild_id": otherGild.String(), "authorize": true}), 403, 50001)
	e.expect(e.do("POST", path, a.Token, ok), 403, 20001)
	if len(e.guilds.installs) != 0 {
		t.Fatalf("a refused authorisation installed: %v", e.guilds.installs)
	}
	r := e.expect(e.do("POST", path+"&permissions=3072", e.admin, map[string]any{"guild_id": guildID.String(), "authorize": true}), 200, 0)
	if r["role_id"] == nil || !strings.Contains(r["location"].(string), "permissions=3072") {
		t.Fatalf("authorize = %v", r)
	}
	in, err := e.store.GetInstallation(t.Context(), guildID, a.ID)
	if err != nil || in.Permissions != 3072 || in.InstalledBy != e.adminID || in.BotUserID != a.BotID {
		t.Fatalf("installation = %+v, %v", in, err)
	}
}

func TestPurgeInteractions(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Purged")
	e.install(a, 0)
	id, token := e.invoke(a, e.command(a, "p"))
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 5}), 204, 0)
	e.clock.Advance(time.Minute)
	if n, err := e.h.PurgeInteractions(t.Context()); err != nil || n != 0 {
		t.Fatalf("PurgeInteractions at 1 min = %d, %v; want 0", n, err)
	}
	e.clock.Advance(17 * time.Minute)
	if n, err := e.h.PurgeInteractions(t.Context()); err != nil || n != 1 {
		t.Fatalf("PurgeInteractions at 18 min = %d, %v; want 1", n, err)
	}
	if _, err := e.store.GetInteraction(t.Context(), id); err == nil {
		t.Fatal("purged interaction still stored")
	}
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/webhooks/%d/%s", a.ID, token), "", map[string]any{"content": "x"}), 401, 50027)
}
