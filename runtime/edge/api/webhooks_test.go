package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type webhookJSONT struct {
	ID        snowflake.ID `json:"id"`
	Type      int          `json:"type"`
	GuildID   snowflake.ID `json:"guild_id"`
	ChannelID snowflake.ID `json:"channel_id"`
	Name      string       `json:"name"`
	Avatar    *string      `json:"avatar"`
	Token     string       `json:"token"`
	URL       string       `json:"url"`
	User      *wire.User   `json:"user"`
}

func (e *env) createWebhook(token string, channel snowflake.ID, name string) webhookJSONT {
	e.t.Helper()
	var wh webhookJSONT
	e.ok("POST", fmt.Sprintf("%s/channels/%d/webhooks", v10, channel), token, map[string]any{"name": name}, &wh)
	return wh
}

func whPath(wh webhookJSONT) string { return fmt.Sprintf("%s/webhooks/%d/%s", v10, wh.ID, wh.Token) }

func TestWebhookManagement(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	owner := e.subscribe("owner", w.alice.ID, guild.IntentGuilds|guild.IntentGuildWebhooks)
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds|guild.IntentGuildWebhooks)

	wh := e.createWebhook(w.alice.Token, w.general, "Logger")
	if wh.Type != 1 || wh.GuildID != w.guildID || wh.ChannelID != w.general || wh.Name != "Logger" ||
		len(wh.Token) < 60 || wh.URL != e.url+"/api/webhooks/"+wh.ID.String()+"/"+wh.Token || wh.User == nil || wh.User.ID != w.alice.ID {
		t.Fatalf("created webhook = %+v", wh)
	}
	ev := e.waitEvent(bobS, "WEBHOOKS_UPDATE", 1)
	var up wire.WebhooksUpdate
	if json.Unmarshal(ev, &up) != nil || up.ChannelID != w.general || up.GuildID != w.guildID {
		t.Fatalf("WEBHOOKS_UPDATE = %s", ev)
	}

	// Errors of creation.
	chPath := fmt.Sprintf("%s/channels/%d/webhooks", v10, w.general)
	e.fail("POST", chPath, w.bob.Token, map[string]any{"name": "x"}, 403, 50013)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/webhooks", v10, w.staff), w.bob.Token, map[string]any{"name": "x"}, 403, 50001)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/webhooks", v10, 12345), w.alice.Token, map[string]any{"name": "x"}, 404, 10003)
	e.fail("POST", chPath, w.alice.Token, map[string]any{}, 400, 50035)
	e.fail("POST", chPath, w.alice.Token, map[string]any{"name": strings.Repeat("n", 81)}, 400, 50035)
	r := e.fail("POST", chPath, w.alice.Token, map[string]any{"name": "Clyde bot"}, 400, 50035)
	if !strings.Contains(string(r.Body), "WEBHOOK_INVALID_USERNAME") {
		t.Fatalf("clyde: %s", r.Body)
	}
	e.fail("POST", chPath, w.alice.Token, map[string]any{"name": "x", "avatar": "not-an-image"}, 400, 50035)
	e.fail("POST", chPath, "", map[string]any{"name": "x"}, 401, 40001)
	var dm wire.Channel
	e.ok("POST", v10+"/users/@me/channels", w.alice.Token, map[string]any{"recipient_id": w.bob.ID.String()}, &dm)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/webhooks", v10, dm.ID), w.alice.Token, map[string]any{"name": "x"}, 400, 50024)

	// Avatar data URIs are accepted and named by a hash.
	var av webhookJSONT
	e.ok("POST", chPath, w.alice.Token, map[string]any{"name": "Pic", "avatar": "data:image/png;base64,iVBORw0KGgo="}, &av)
	if av.Avatar == nil || len(*av.Avatar) != 32 {
		t.Fatalf("avatar = %v", av.Avatar)
	}

	// Listing and reading: never the token, only with MANAGE_WEBHOOKS.
	var list []webhookJSONT
	e.ok("GET", chPath, w.alice.Token, nil, &list)
	if len(list) != 2 || list[0].Token != "" || list[0].ID != wh.ID {
		t.Fatalf("channel webhooks = %+v", list)
	}
	e.fail("GET", chPath, w.bob.Token, nil, 403, 50013)
	staffHook := e.createWebhook(w.alice.Token, w.staff, "Staff log")
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/webhooks", v10, w.guildID), w.alice.Token, nil, &list)
	if len(list) != 3 {
		t.Fatalf("guild webhooks = %+v", list)
	}
	e.fail("GET", fmt.Sprintf("%s/guilds/%d/webhooks", v10, w.guildID), w.bob.Token, nil, 403, 50013)
	var got webhookJSONT
	e.ok("GET", fmt.Sprintf("%s/webhooks/%d", v10, wh.ID), w.alice.Token, nil, &got)
	if got.ID != wh.ID || got.Token != "" || got.User == nil {
		t.Fatalf("get webhook = %+v", got)
	}
	e.fail("GET", fmt.Sprintf("%s/webhooks/%d", v10, wh.ID), w.bob.Token, nil, 403, 50013)
	// A webhook of a channel bob cannot see does not exist for him.
	e.fail("GET", fmt.Sprintf("%s/webhooks/%d", v10, staffHook.ID), w.bob.Token, nil, 404, 10015)
	e.fail("GET", fmt.Sprintf("%s/webhooks/%d", v10, 999), w.alice.Token, nil, 404, 10015)
	// A barrier: bob's events of the guild come in order, so once the
	// CHANNEL_UPDATE of a change after the staff webhook is there, a
	// WEBHOOKS_UPDATE of staff would be too.
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, w.general), w.alice.Token, map[string]any{"topic": "after the staff webhook"}, nil)
	e.waitFor(bobS, "CHANNEL_UPDATE after the staff webhook", func(ds []delivery) bool {
		return slices.ContainsFunc(ds, func(d delivery) bool {
			return d.Type == "CHANNEL_UPDATE" && strings.Contains(string(d.Payload), "after the staff webhook")
		})
	})
	if n := countEvents(e.events(bobS), "WEBHOOKS_UPDATE"); n != 2 {
		t.Fatalf("bob got %d WEBHOOKS_UPDATE, want 2 (general only, never staff)", n)
	}

	// Token routes need no Authorization; a wrong token is 50027.
	got = webhookJSONT{}
	e.ok("GET", whPath(wh), "", nil, &got)
	if got.ID != wh.ID || got.User != nil || got.Token != "" {
		t.Fatalf("token get = %+v", got)
	}
	e.fail("GET", fmt.Sprintf("%s/webhooks/%d/%s", v10, wh.ID, "wrong"), "", nil, 401, 50027)
	e.fail("GET", fmt.Sprintf("%s/webhooks/%d/%s", v10, 999, wh.Token), "", nil, 404, 10015)

	// Modify: rename, move (needs MANAGE_WEBHOOKS in the new channel too).
	e.ok("PATCH", fmt.Sprintf("%s/webhooks/%d", v10, wh.ID), w.alice.Token, map[string]any{"name": "Renamed", "channel_id": w.staff.String()}, &got)
	if got.Name != "Renamed" || got.ChannelID != w.staff {
		t.Fatalf("patched = %+v", got)
	}
	e.fail("PATCH", fmt.Sprintf("%s/webhooks/%d", v10, wh.ID), w.alice.Token, map[string]any{"name": ""}, 400, 50035)
	e.ok("PATCH", whPath(wh), "", map[string]any{"name": "By token"}, &got)
	if got.Name != "By token" {
		t.Fatalf("token patch = %+v", got)
	}
	e.fail("PATCH", whPath(wh), "", map[string]any{"channel_id": w.general.String()}, 400, 50035)
	e.waitEvent(owner, "WEBHOOKS_UPDATE", 5)

	// Audit log: create, update, delete.
	e.ok("DELETE", fmt.Sprintf("%s/webhooks/%d", v10, av.ID), w.alice.Token, nil, nil)
	e.fail("DELETE", fmt.Sprintf("%s/webhooks/%d", v10, av.ID), w.alice.Token, nil, 404, 10015)
	e.ok("DELETE", whPath(staffHook), "", nil, nil)
	e.fail("GET", whPath(staffHook), "", nil, 404, 10015)
	var log struct {
		Entries []struct {
			ActionType int    `json:"action_type"`
			TargetID   string `json:"target_id"`
		} `json:"audit_log_entries"`
	}
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/audit-logs", v10, w.guildID), w.alice.Token, nil, &log)
	counts := map[int]int{}
	for _, en := range log.Entries {
		counts[en.ActionType]++
	}
	if counts[auditWebhookCreate] != 3 || counts[auditWebhookUpdate] != 2 || counts[auditWebhookDelete] != 2 {
		t.Fatalf("audit counts = %v", counts)
	}
}

func TestWebhookLimit(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	for i := 0; i < maxChannelWebhooks; i++ {
		e.createWebhook(w.alice.Token, w.general, fmt.Sprintf("hook %d", i))
	}
	e.fail("POST", fmt.Sprintf("%s/channels/%d/webhooks", v10, w.general), w.alice.Token, map[string]any{"name": "one more"}, 400, 30007)
}

func TestWebhookExecute(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds|guild.IntentGuildMessages|guild.IntentMessageContent)
	wh := e.createWebhook(w.alice.Token, w.general, "Logger")

	// Without wait: 204 and no body; the message still arrives.
	r := e.call("POST", whPath(wh), "", map[string]any{"content": "quiet"})
	if r.Status != 204 || len(r.Body) != 0 {
		t.Fatalf("execute without wait = %d %s", r.Status, r.Body)
	}
	var m wire.Message
	e.ok("POST", whPath(wh)+"?wait=true", "", map[string]any{
		"content": "hello <@" + w.bob.ID.String() + ">", "username": "Override", "avatar_url": "https://example.com/a.png",
		"embeds": []map[string]any{{"title": "Log", "description": "something happened"}},
	}, &m)
	if m.WebhookID != wh.ID || m.Author.ID != wh.ID || !m.Author.Bot || m.Author.Username != "Override" ||
		m.Author.Avatar == nil || m.Member != nil || len(m.Embeds) != 1 || m.ChannelID != w.general ||
		len(m.Mentions) != 1 || m.Mentions[0].ID != w.bob.ID {
		t.Fatalf("webhook message = %+v", m)
	}
	ev := e.waitEvent(bobS, "MESSAGE_CREATE", 2)
	var got wire.Message
	if json.Unmarshal(ev, &got) != nil || got.ID != m.ID || got.WebhookID != wh.ID || got.Author.Username != "Override" {
		t.Fatalf("MESSAGE_CREATE = %s", ev)
	}
	// The url the webhook object carries is unversioned, as Discord's is,
	// and executing it works: it is what people paste into the services
	// that post to it.
	var viaURL wire.Message
	e.ok("POST", strings.TrimPrefix(wh.URL, e.url)+"?wait=true", "", map[string]any{"content": "via the url"}, &viaURL)
	if viaURL.WebhookID != wh.ID || viaURL.Content != "via the url" {
		t.Fatalf("execute through the webhook's url = %+v", viaURL)
	}
	// It is a message of the channel like any other.
	var read wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.bob.Token, nil, &read)
	if read.WebhookID != wh.ID || read.Author.ID != wh.ID {
		t.Fatalf("read = %+v", read)
	}

	// Errors of execution.
	e.fail("POST", whPath(wh), "", map[string]any{}, 400, 50006)
	e.fail("POST", whPath(wh), "", map[string]any{"content": strings.Repeat("x", 2001)}, 400, 50035)
	e.fail("POST", whPath(wh), "", map[string]any{"content": "x", "username": "discord"}, 400, 50035)
	e.fail("POST", whPath(wh), "", map[string]any{"content": "x", "embeds": []map[string]any{{"title": strings.Repeat("t", 257)}}}, 400, 50035)
	e.fail("POST", whPath(wh)+"?wait=maybe", "", map[string]any{"content": "x"}, 400, 50035)
	e.fail("POST", whPath(wh)+"?thread_id=123", "", map[string]any{"content": "x"}, 404, 10003)
	e.fail("POST", fmt.Sprintf("%s/webhooks/%d/nope", v10, wh.ID), "", map[string]any{"content": "x"}, 401, 50027)
	e.fail("POST", whPath(wh), "", map[string]any{"content": "x", "thread_name": "t"}, 400, 50035)

	// Own messages: read, edit, delete; other messages are unknown.
	msgPath := fmt.Sprintf("%s/messages/%d", whPath(wh), m.ID)
	e.ok("GET", msgPath, "", nil, &got)
	if got.ID != m.ID || got.Content != m.Content {
		t.Fatalf("get own = %+v", got)
	}
	e.ok("PATCH", msgPath, "", map[string]any{"content": "edited", "embeds": []any{}}, &got)
	if got.Content != "edited" || len(got.Embeds) != 0 || got.EditedTimestamp == nil || got.Author.Username != "Override" {
		t.Fatalf("edited = %+v", got)
	}
	e.waitEvent(bobS, "MESSAGE_UPDATE", 1)
	user := e.post(w.bob.Token, w.general, map[string]any{"content": "mine"})
	e.fail("GET", fmt.Sprintf("%s/messages/%d", whPath(wh), user.ID), "", nil, 404, 10008)
	e.fail("PATCH", fmt.Sprintf("%s/messages/%d", whPath(wh), user.ID), "", map[string]any{"content": "hijack"}, 404, 10008)
	e.fail("DELETE", fmt.Sprintf("%s/messages/%d", whPath(wh), user.ID), "", nil, 404, 10008)
	// A user cannot edit a webhook's message through the channel route.
	e.fail("PATCH", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.alice.Token, map[string]any{"content": "x"}, 403, 50005)
	e.ok("DELETE", msgPath, "", nil, nil)
	e.waitEvent(bobS, "MESSAGE_DELETE", 1)
	e.fail("GET", msgPath, "", nil, 404, 10008)
}

// TestWebhookRateLimit checks Discord's webhook execution limits on a
// clock the test moves: 5 per 2 s per webhook (429 scope "user"), 30 per
// minute per channel for all its webhooks together (429 scope "shared"),
// with the bucket's X-RateLimit-* headers on every answer and Discord's
// 429 body and headers on a refusal.
func TestWebhookRateLimit(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := newEnvConfig(t, Config{Now: clock})
	w := e.world()
	hooks := make([]webhookJSONT, 7)
	for i := range hooks {
		hooks[i] = e.createWebhook(w.alice.Token, w.general, fmt.Sprint("Hook ", i))
	}
	elsewhere := e.createWebhook(w.alice.Token, w.staff, "Elsewhere")
	exec := func(wh webhookJSONT) resp {
		t.Helper()
		return e.call("POST", whPath(wh), "", map[string]any{"content": "tick"})
	}
	refused := func(r resp, scope string, limit int, retry float64) {
		t.Helper()
		h := r.Header
		if r.Status != 429 || h.Get("X-RateLimit-Scope") != scope || h.Get("Via") == "" || h.Get("Content-Type") != "application/json" ||
			h.Get("Retry-After") != strconv.Itoa(int(retry)) || h.Get("X-RateLimit-Limit") != strconv.Itoa(limit) || h.Get("X-RateLimit-Remaining") != "0" {
			t.Fatalf("refusal = %d %v %s", r.Status, h, r.Body)
		}
		var body struct {
			Message    string  `json:"message"`
			RetryAfter float64 `json:"retry_after"`
			Global     *bool   `json:"global"`
		}
		r.json(t, &body)
		if body.Message != "You are being rate limited." || body.RetryAfter != retry || body.Global == nil || *body.Global {
			t.Fatalf("429 body = %s", r.Body)
		}
	}
	// One webhook: five, each telling what is left, then a refusal.
	bucket := ""
	for i := 0; i < webhookBurst; i++ {
		r := exec(hooks[0])
		h := r.Header
		if r.Status != 204 || h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != strconv.Itoa(webhookBurst-1-i) ||
			h.Get("X-RateLimit-Reset-After") != "2.000" || h.Get("X-RateLimit-Bucket") == "" || bucket != "" && h.Get("X-RateLimit-Bucket") != bucket {
			t.Fatalf("execution %d = %d %v %s", i, r.Status, h, r.Body)
		}
		bucket = h.Get("X-RateLimit-Bucket")
	}
	refused(exec(hooks[0]), "user", webhookBurst, 2)
	// The channel's other webhooks have their own buckets, up to the
	// channel's thirty a minute.
	for _, wh := range hooks[1:6] {
		for i := 0; i < webhookBurst; i++ {
			if r := exec(wh); r.Status != 204 {
				t.Fatalf("%s execution %d = %d %s", wh.Name, i, r.Status, r.Body)
			}
		}
	}
	refused(exec(hooks[6]), "shared", webhookChannelBurst, 60)
	// Another channel is not affected.
	if r := exec(elsewhere); r.Status != 204 {
		t.Fatalf("another channel's webhook = %d %s", r.Status, r.Body)
	}
	// The webhook's window runs out before the channel's.
	advance(webhookWindow)
	refused(exec(hooks[0]), "shared", webhookChannelBurst, 58)
	advance(webhookChannelWindow)
	var m wire.Message
	e.ok("POST", whPath(hooks[6])+"?wait=true", "", map[string]any{"content": "again"}, &m)
	if m.Content != "again" {
		t.Fatalf("after the windows = %+v", m)
	}
}

// TestWebhookChannelLimitEveryAPINode: the executions of a channel's
// webhooks count against one window whichever api node they come
// through (against the split topology, alternately through each; in
// process, through the one handler): thirty pass, each webhook within its
// own five, and the thirty-first, through a webhook of its own, is the
// channel's 429. The windows are Discord's (webhookChannelWindow is a
// minute), on the real clock: thirty-one requests take far less.
func TestWebhookChannelLimitEveryAPINode(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	nodes := []string{e.url}
	if topologyURL() != "" {
		nodes = topo.apis
	}
	hooks := make([]webhookJSONT, webhookChannelBurst/webhookBurst+1)
	for i := range hooks {
		hooks[i] = e.createWebhook(w.alice.Token, w.general, fmt.Sprint("Hook ", i))
	}
	for i := range webhookChannelBurst {
		e.url = nodes[i%len(nodes)]
		wh := hooks[i%(len(hooks)-1)]
		if r := e.call("POST", whPath(wh), "", map[string]any{"content": "tick"}); r.Status != 204 {
			t.Fatalf("execution %d through %s = %d %v %s", i, e.url, r.Status, r.Header, r.Body)
		}
	}
	for _, node := range nodes {
		e.url = node
		r := e.call("POST", whPath(hooks[len(hooks)-1]), "", map[string]any{"content": "one too many"})
		if r.Status != 429 || r.Header.Get("X-RateLimit-Scope") != "shared" {
			t.Fatalf("execution %d through %s = %d %v %s, want the channel's 429", webhookChannelBurst+1, node, r.Status, r.Header, r.Body)
		}
	}
}

// A webhook in a channel someone cannot see never mentions them: the
// mention would tell them the message exists.
func TestWebhookMentionsHiddenChannel(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	wh := e.createWebhook(w.alice.Token, w.staff, "Staff")
	var m wire.Message
	e.ok("POST", whPath(wh)+"?wait=true", "", map[string]any{"content": "<@" + w.bob.ID.String() + "> <@" + w.alice.ID.String() + ">"}, &m)
	if len(m.Mentions) != 1 || m.Mentions[0].ID != w.alice.ID {
		t.Fatalf("mentions = %+v", m.Mentions)
	}
}

// Deleting a channel deletes its webhooks: the token stops working.
func TestWebhookChannelDeleted(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	wh := e.createWebhook(w.alice.Token, w.staff, "Doomed")
	keep := e.createWebhook(w.alice.Token, w.general, "Survivor")
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d", v10, w.staff), w.alice.Token, nil, nil)
	e.fail("POST", whPath(wh), "", map[string]any{"content": "x"}, 404, 10015)
	e.fail("GET", fmt.Sprintf("%s/webhooks/%d", v10, wh.ID), w.alice.Token, nil, 404, 10015)
	e.ok("POST", whPath(keep), "", map[string]any{"content": "still here"}, nil)
	e.ok("DELETE", fmt.Sprintf("%s/guilds/%d", v10, w.guildID), w.alice.Token, nil, nil)
	e.fail("POST", whPath(keep), "", map[string]any{"content": "x"}, 404, 10015)
}

// FuzzDecodeExecuteWebhook: any body decodes or fails as a Discord 400.
func FuzzDecodeExecuteWebhook(f *testing.F) {
	for _, s := range []string{
		`{"content":"hi","username":"Logger","avatar_url":"https://x/a.png"}`,
		`{"embeds":[{"title":"t","fields":[{"name":"n","value":"v"}]}],"allowed_mentions":{"parse":[]}}`,
		`{"content":"x","attachments":[{"id":0,"filename":"a.png"}]}`,
		`{"username":"clyde"}`, `{"thread_name":"t","content":"x"}`, `{"content":7}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, body []byte, files int) {
		req, err := decodeExecuteWebhook(body, files&3)
		checkDecodeError(t, err)
		if err == nil && utf8.RuneCountInString(req.Content) > maxContent {
			t.Fatalf("accepted %d characters", utf8.RuneCountInString(req.Content))
		}
	})
}
