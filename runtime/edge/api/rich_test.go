package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/wire"
)

// formPath fails unless a 50035 body names the dotted field path.
func formPath(t *testing.T, r resp, path string) {
	t.Helper()
	var body struct {
		Code   int            `json:"code"`
		Errors map[string]any `json:"errors"`
	}
	r.json(t, &body)
	if body.Code != 50035 {
		t.Fatalf("code %d, want 50035: %s", body.Code, r.Body)
	}
	var node any = body.Errors
	for _, p := range strings.Split(path, ".") {
		m, ok := node.(map[string]any)
		if !ok || m[p] == nil {
			t.Fatalf("error does not name %q: %s", path, r.Body)
		}
		node = m[p]
	}
	if m, ok := node.(map[string]any); !ok || m["_errors"] == nil {
		t.Fatalf("no _errors at %q: %s", path, r.Body)
	}
}

func TestEmbedsStoredAndValidated(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	embed := map[string]any{
		"title": "Release", "description": "notes", "color": 0x00ff00, "url": "https://example.com/r",
		"timestamp": "2024-05-01T12:00:00Z",
		"footer":    map[string]any{"text": "foot"}, "author": map[string]any{"name": "bot"},
		"image":  map[string]any{"url": "https://example.com/i.png"},
		"fields": []map[string]any{{"name": "a", "value": "1", "inline": true}},
	}
	m := e.post(w.alice.Token, w.general, map[string]any{"embeds": []any{embed}, "flags": 4 | 64})
	if len(m.Embeds) != 1 || m.Flags != 4 {
		t.Fatalf("sent embeds %d, flags %d", len(m.Embeds), m.Flags)
	}
	var got wire.Message
	e.ok("GET", fmt.Sprintf("%s/%d", path, m.ID), w.bob.Token, nil, &got)
	var em struct {
		Type      string `json:"type"`
		Title     string `json:"title"`
		Timestamp string `json:"timestamp"`
		Image     struct {
			URL      string `json:"url"`
			ProxyURL string `json:"proxy_url"`
		} `json:"image"`
		Fields []struct {
			Name   string `json:"name"`
			Inline bool   `json:"inline"`
		} `json:"fields"`
	}
	if len(got.Embeds) != 1 {
		t.Fatalf("stored embeds: %s", got.Embeds)
	}
	if err := json.Unmarshal(got.Embeds[0], &em); err != nil {
		t.Fatal(err)
	}
	if em.Type != "rich" || em.Title != "Release" || em.Timestamp != "2024-05-01T12:00:00.000000+00:00" ||
		em.Image.ProxyURL == "" || len(em.Fields) != 1 || !em.Fields[0].Inline {
		t.Fatalf("stored embed = %s", got.Embeds[0])
	}

	// Edits replace or clear embeds.
	e.ok("PATCH", fmt.Sprintf("%s/%d", path, m.ID), w.alice.Token, map[string]any{"embeds": []any{map[string]any{"description": "v2"}}}, &got)
	if len(got.Embeds) != 1 || !strings.Contains(string(got.Embeds[0]), "v2") {
		t.Fatalf("edited embeds: %s", got.Embeds)
	}
	e.ok("PATCH", fmt.Sprintf("%s/%d", path, m.ID), w.alice.Token, map[string]any{"content": "text", "embeds": []any{}}, &got)
	e.ok("GET", fmt.Sprintf("%s/%d", path, m.ID), w.bob.Token, nil, &got)
	if len(got.Embeds) != 0 || got.Content != "text" {
		t.Fatalf("cleared embeds: %s", got.Embeds)
	}

	long := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		name string
		body map[string]any
		path string
	}{
		{"title", map[string]any{"embeds": []any{map[string]any{"title": long(257)}}}, "embeds.0.title"},
		{"description", map[string]any{"embeds": []any{map[string]any{"description": long(4097)}}}, "embeds.0.description"},
		{"field value", map[string]any{"embeds": []any{map[string]any{"title": "t", "fields": []any{map[string]any{"name": "n", "value": long(1025)}}}}}, "embeds.0.fields.0.value"},
		{"field name required", map[string]any{"embeds": []any{map[string]any{"title": "t", "fields": []any{map[string]any{"value": "v"}}}}}, "embeds.0.fields.0.name"},
		{"footer", map[string]any{"embeds": []any{map[string]any{"footer": map[string]any{"text": long(2049)}}}}, "embeds.0.footer.text"},
		{"author", map[string]any{"embeds": []any{map[string]any{"author": map[string]any{"name": long(257)}}}}, "embeds.0.author.name"},
		{"too many fields", map[string]any{"embeds": []any{map[string]any{"title": "t", "fields": make([]map[string]any, 26)}}}, "embeds.0.fields"},
		{"eleven embeds", map[string]any{"embeds": make([]map[string]any, 11)}, "embeds"},
		{"6000 in total", map[string]any{"embeds": []any{
			map[string]any{"description": long(4000)}, map[string]any{"description": long(2001)},
		}}, "embeds"},
		{"bad type", map[string]any{"embeds": []any{map[string]any{"title": 5}}}, "embeds.0.title"},
		{"bad url", map[string]any{"embeds": []any{map[string]any{"title": "t", "url": "javascript:alert(1)"}}}, "embeds.0.url"},
		{"color", map[string]any{"embeds": []any{map[string]any{"title": "t", "color": 1 << 24}}}, "embeds.0.color"},
		{"allowed_mentions exclusive", map[string]any{"content": "x", "allowed_mentions": map[string]any{"parse": []string{"users"}, "users": []string{w.bob.ID.String()}}}, "allowed_mentions"},
		{"allowed_mentions parse", map[string]any{"content": "x", "allowed_mentions": map[string]any{"parse": []string{"nobody"}}}, "allowed_mentions.parse.0"},
		{"duplicate custom_id", map[string]any{"content": "x", "components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 2, "style": 1, "label": "a", "custom_id": "same"},
			map[string]any{"type": 2, "style": 2, "label": "b", "custom_id": "same"},
		}}}}, "components.0.components.1.custom_id"},
		{"link button without url", map[string]any{"content": "x", "components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 2, "style": 5, "label": "a"},
		}}}}, "components.0.components.0.url"},
	} {
		r := e.fail("POST", path, w.alice.Token, c.body, 400, 50035)
		formPath(t, r, c.path)
	}
	// Stickers do not exist on Concord: refused with Discord's code.
	e.fail("POST", path, w.alice.Token, map[string]any{"sticker_ids": []string{"123"}}, 400, 50081)
	e.fail("POST", path, w.alice.Token, map[string]any{"embeds": []any{}}, 400, 50006)
}

func TestComponentsStored(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	rows := []any{
		map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 2, "style": 1, "label": "Open", "custom_id": "ticket:open"},
			map[string]any{"type": 2, "style": 5, "label": "Docs", "url": "https://example.com"},
		}},
		map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 3, "custom_id": "pick", "options": []any{
				map[string]any{"label": "A", "value": "a"}, map[string]any{"label": "B", "value": "b"},
			}},
		}},
	}
	m := e.post(w.alice.Token, w.general, map[string]any{"content": "choose", "components": rows})
	var got wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.bob.Token, nil, &got)
	if len(got.Components) != 2 || !strings.Contains(string(got.Components[0]), `"custom_id":"ticket:open"`) {
		t.Fatalf("components = %s", got.Components)
	}
	// Components alone make a message.
	e.post(w.alice.Token, w.general, map[string]any{"components": rows[:1]})
}

func TestRoleColors(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	sess := e.subscribe("bob-colors", w.bob.ID, 0)
	ds := e.waitFor(sess, "GUILD_CREATE", func(ds []delivery) bool { return len(ds) >= 1 })
	if !strings.Contains(string(ds[0].Payload), `"colors":{"primary_color":0,"secondary_color":null,"tertiary_color":null}`) {
		t.Fatalf("GUILD_CREATE roles lack colors: %.400s", ds[0].Payload)
	}
	var role wire.Role
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.alice.Token,
		map[string]any{"name": "grad", "colors": map[string]any{"primary_color": 0xff0000, "secondary_color": 0x0000ff}}, &role)
	if role.Color != 0xff0000 || role.Colors.PrimaryColor != 0xff0000 || role.Colors.SecondaryColor == nil || *role.Colors.SecondaryColor != 0xff {
		t.Fatalf("role = %+v", role)
	}
	e.ok("PATCH", fmt.Sprintf("%s/guilds/%d/roles/%d", v10, w.guildID, role.ID), w.alice.Token,
		map[string]any{"colors": map[string]any{"primary_color": 5, "secondary_color": nil}}, &role)
	if role.Color != 5 || role.Colors.SecondaryColor != nil {
		t.Fatalf("patched role = %+v", role)
	}
	var roles []wire.Role
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.alice.Token, nil, &roles)
	found := false
	for _, r := range roles {
		found = found || r.ID == role.ID && r.Colors.PrimaryColor == 5
	}
	if !found {
		t.Fatalf("roles = %+v", roles)
	}
	r := e.fail("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.alice.Token,
		map[string]any{"colors": map[string]any{"primary_color": -1}}, 400, 50035)
	formPath(t, r, "colors.primary_color")
	r = e.fail("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guildID), w.alice.Token, map[string]any{"unicode_emoji": "🔥"}, 400, 50035)
	formPath(t, r, "unicode_emoji")
}
