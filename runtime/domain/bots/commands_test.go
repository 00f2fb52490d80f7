package bots_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

func TestCommandCRUD(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Cmds")
	base := fmt.Sprintf("/api/v10/applications/%d/commands", a.ID)

	c := e.expect(e.do("POST", base, a.Token, map[string]any{
		"name": "echo", "description": "echo text",
		"options": []any{map[string]any{"type": 3, "name": "text", "description": "what", "required": true}},
	}), 201, 0)
	if c["application_id"] != a.ID.String() || c["type"].(float64) != 1 || c["default_member_permissions"] != nil {
		t.Fatalf("command = %v", c)
	}
	id := c["id"].(string)
	// Creating the same name again replaces it, keeping the id.
	c2 := e.expect(e.do("POST", base, e.owner, map[string]any{"name": "echo", "description": "v2"}), 200, 0)
	if c2["id"] != id || c2["description"] != "v2" || c2["version"] == c["version"] {
		t.Fatalf("upsert = %v", c2)
	}
	e.expect(e.do("POST", base, a.Token, map[string]any{"name": "Info", "type": 2}), 201, 0)

	r := e.do("GET", base, a.Token, nil)
	var list []map[string]any
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list) != 2 {
		t.Fatalf("list = %s", r.Body)
	}
	p := e.expect(e.do("PATCH", base+"/"+id, a.Token, map[string]any{"description": "patched", "default_member_permissions": "32"}), 200, 0)
	if p["description"] != "patched" || p["name"] != "echo" || p["default_member_permissions"] != "32" {
		t.Fatalf("patch = %v", p)
	}
	e.expect(e.do("PATCH", base+"/"+id, a.Token, map[string]any{"type": 3}), 400, 50035)
	e.expect(e.do("PATCH", base+"/"+id, a.Token, map[string]any{"name": "Bad Name"}), 400, 50035)
	g := e.expect(e.do("GET", base+"/"+id, a.Token, nil), 200, 0)
	if g["description"] != "patched" {
		t.Fatalf("a refused patch changed the command: %v", g)
	}

	// PUT makes the scope exactly the list; same names keep ids.
	r = e.do("PUT", base, a.Token, []any{
		map[string]any{"name": "echo", "description": "again"},
		map[string]any{"name": "new", "description": "fresh"},
	})
	if r.Status != 200 {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list) != 2 || list[0]["id"] != id {
		t.Fatalf("PUT = %s", r.Body)
	}
	e.expect(e.do("PUT", base, a.Token, []any{
		map[string]any{"name": "same", "description": "a"}, map[string]any{"name": "same", "description": "b"},
	}), 400, 50035)

	e.expect(e.do("DELETE", base+"/"+id, a.Token, nil), 204, 0)
	e.expect(e.do("GET", base+"/"+id, a.Token, nil), 404, 10063)
	e.expect(e.do("DELETE", base+"/"+id, a.Token, nil), 404, 10063)

	// Strangers and other applications' bots see nothing.
	e.expect(e.do("GET", base, e.member, nil), 404, 10002)
	other := e.createApp("Other")
	e.expect(e.do("POST", base, other.Token, map[string]any{"name": "x", "description": "y"}), 404, 10002)
}

func TestGuildCommandsNeedInstallation(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("GuildCmds")
	gbase := fmt.Sprintf("/api/v10/applications/%d/guilds/%d/commands", a.ID, guildID)
	e.expect(e.do("POST", gbase, a.Token, map[string]any{"name": "g", "description": "guild"}), 403, 50001)
	e.install(a, permissions.SendMessages)
	c := e.expect(e.do("POST", gbase, a.Token, map[string]any{"name": "g", "description": "guild"}), 201, 0)
	if c["guild_id"] != guildID.String() {
		t.Fatalf("guild command = %v", c)
	}
	r := e.do("GET", fmt.Sprintf("/api/v10/applications/%d/commands", a.ID), a.Token, nil)
	if string(r.Body) != "[]" {
		t.Fatalf("guild command listed globally: %s", r.Body)
	}
}

// TestMalformedCommands checks that each malformed definition is refused
// with 50035 naming the offending field.
func TestMalformedCommands(t *testing.T) {
	opt := func(kv ...any) map[string]any {
		m := map[string]any{"type": 3, "name": "o", "description": "d"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	many := make([]any, 26)
	for i := range many {
		many[i] = opt("name", fmt.Sprintf("o%d", i))
	}
	cases := []struct {
		name string
		def  map[string]any
		path string
	}{
		{"upper case", map[string]any{"name": "Ping", "description": "d"}, "name"},
		{"space", map[string]any{"name": "two words", "description": "d"}, "name"},
		{"too long", map[string]any{"name": strings.Repeat("a", 33), "description": "d"}, "name"},
		{"empty name", map[string]any{"name": "", "description": "d"}, "name"},
		{"punctuation", map[string]any{"name": "a!", "description": "d"}, "name"},
		{"no description", map[string]any{"name": "a"}, "description"},
		{"long description", map[string]any{"name": "a", "description": strings.Repeat("x", 101)}, "description"},
		{"bad type", map[string]any{"name": "a", "description": "d", "type": 9}, "type"},
		{"user command description", map[string]any{"name": "User Info", "type": 2, "description": "no"}, "description"},
		{"message command options", map[string]any{"name": "Msg", "type": 3, "options": []any{opt()}}, "options"},
		{"26 options", map[string]any{"name": "a", "description": "d", "options": many}, "options"},
		{"option type 12", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 12)}}, "options.0.type"},
		{"option upper", map[string]any{"name": "a", "description": "d", "options": []any{opt("name", "Opt")}}, "options.0.name"},
		{"option description", map[string]any{"name": "a", "description": "d", "options": []any{opt("description", "")}}, "options.0.description"},
		{"duplicate options", map[string]any{"name": "a", "description": "d", "options": []any{opt(), opt()}}, "options.1.name"},
		{"required after optional", map[string]any{"name": "a", "description": "d", "options": []any{opt("name", "x"), opt("name", "y", "required", true)}}, "options.1.required"},
		{"choices on boolean", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 5, "choices", []any{map[string]any{"name": "c", "value": true}})}}, "options.0.choices"},
		{"choice value type", map[string]any{"name": "a", "description": "d", "options": []any{opt("choices", []any{map[string]any{"name": "c", "value": 1}})}}, "options.0.choices.0.value"},
		{"autocomplete with choices", map[string]any{"name": "a", "description": "d", "options": []any{opt("autocomplete", true, "choices", []any{map[string]any{"name": "c", "value": "v"}})}}, "options.0.autocomplete"},
		{"min above max", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 4, "min_value", 5, "max_value", 1)}}, "options.0.max_value"},
		{"min_length on integer", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 4, "min_length", 1)}}, "options.0.min_length"},
		{"subcommands mixed", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 1, "name", "s"), opt("name", "p")}}, "options"},
		{"group with plain option", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 2, "name", "g", "options", []any{opt()})}}, "options.0.options.0.type"},
		{"nested group", map[string]any{"name": "a", "description": "d", "options": []any{opt("type", 1, "name", "s", "options", []any{opt("type", 2)})}}, "options.0.options.0.type"},
		{"permissions type", map[string]any{"name": "a", "description": "d", "default_member_permissions": "lots"}, "default_member_permissions"},
		{"too large", map[string]any{"name": "a", "description": "d", "options": bigOptions()}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(tc.def)
			_, err := bots.DecodeCommand(body)
			ae, ok := err.(*bots.APIError)
			if !ok || ae.Code != 50035 || ae.Status != 400 {
				t.Fatalf("DecodeCommand(%s) = %v, want a 50035 APIError", body, err)
			}
			node := any(ae.Errors)
			for _, part := range strings.Split(tc.path, ".") {
				if part == "" {
					continue
				}
				m, _ := node.(map[string]any)
				if node = m[part]; node == nil {
					t.Fatalf("errors %v do not name %q", ae.Errors, tc.path)
				}
			}
			if _, ok := node.(map[string]any)["_errors"]; !ok {
				t.Fatalf("no _errors at %q: %v", tc.path, ae.Errors)
			}
		})
	}
}

// bigOptions is a definition over the 8000-character limit.
func bigOptions() []any {
	out := []any{}
	for i := range 25 {
		choices := []any{}
		for j := range 25 {
			choices = append(choices, map[string]any{"name": strings.Repeat("n", 20), "value": fmt.Sprint(j)})
		}
		out = append(out, map[string]any{"type": 3, "name": fmt.Sprint("o", i), "description": "d", "choices": choices})
	}
	return out
}

func TestValidCommandsAccepted(t *testing.T) {
	for _, body := range []string{
		`{"name":"ping","description":"p"}`,
		`{"name":"пинг","description":"unicode letters are fine"}`,
		`{"name":"a-b_c9","description":"d","default_member_permissions":8,"options":[{"type":4,"name":"n","description":"d","required":true,"min_value":1,"max_value":10},{"type":3,"name":"s","description":"d","choices":[{"name":"A","value":"a"}]}]}`,
		`{"name":"admin","description":"d","options":[{"type":2,"name":"user","description":"d","options":[{"type":1,"name":"ban","description":"d","options":[{"type":6,"name":"who","description":"d","required":true}]}]}]}`,
		`{"name":"User Info","type":2}`,
		`{"name":"x","description":"d","extra_field_from_a_newer_library":true}`,
	} {
		if _, err := bots.DecodeCommand([]byte(body)); err != nil {
			t.Errorf("DecodeCommand(%s) = %v", body, err)
		}
	}
}

// FuzzDecodeCommand checks that the decoder never panics and that what it
// accepts survives a round trip unchanged and stays valid.
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range []string{
		`{"name":"ping","description":"p"}`,
		`{"name":"admin","description":"d","options":[{"type":2,"name":"user","description":"d","options":[{"type":1,"name":"ban","description":"d"}]}]}`,
		`{"name":"n","description":"d","options":[{"type":4,"name":"i","description":"d","choices":[{"name":"c","value":3}],"min_value":-1}]}`,
		`{"name":"User Info","type":2}`,
		`{"name":"x","description":"d","default_member_permissions":"8","name_localizations":{"de":"y"}}`,
		`[]`, `null`, `{"options":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		def, err := bots.DecodeCommand(body)
		if err != nil {
			if _, ok := err.(*bots.APIError); !ok {
				t.Fatalf("error %T is not an APIError", err)
			}
			return
		}
		again, err := json.Marshal(def)
		if err != nil {
			t.Fatalf("accepted definition does not encode: %v", err)
		}
		def2, err := bots.DecodeCommand(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if !reflect.DeepEqual(def, def2) {
			t.Fatalf("round trip changed the definition:\n%+v\n%+v", def, def2)
		}
	})
}
