package bots_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestResolvedOptions: user, channel and role options arrive with
// data.resolved as discord.py and discord.js read it; a channel of
// another guild never resolves.
func TestResolvedOptions(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Resolver")
	e.install(a, 0)
	m := e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/commands", a.ID), a.Token, map[string]any{
		"name": "info", "description": "about things", "options": []any{
			map[string]any{"type": 6, "name": "who", "description": "a user"},
			map[string]any{"type": 7, "name": "where", "description": "a channel"},
			map[string]any{"type": 8, "name": "role", "description": "a role"},
		},
	}), 201, 0)
	cmd := m["id"].(string)
	invoke := func(opts ...any) response {
		return e.do("POST", "/api/v10/interactions", e.member, map[string]any{
			"type": 2, "application_id": a.ID.String(), "channel_id": channelID.String(),
			"data": map[string]any{"id": cmd, "type": 1, "options": opts},
		})
	}
	e.expect(invoke(
		map[string]any{"type": 6, "name": "who", "value": e.adminID.String()},
		map[string]any{"type": 7, "name": "where", "value": channelID.String()},
		map[string]any{"type": 8, "name": "role", "value": "77"},
	), 204, 0)
	d := e.dispatch.deliveries()
	var p struct {
		Data struct {
			Resolved struct {
				Users    map[snowflake.ID]map[string]any `json:"users"`
				Members  map[snowflake.ID]map[string]any `json:"members"`
				Roles    map[snowflake.ID]map[string]any `json:"roles"`
				Channels map[snowflake.ID]map[string]any `json:"channels"`
			} `json:"resolved"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d[len(d)-1].Payload, &p); err != nil {
		t.Fatal(err)
	}
	r := p.Data.Resolved
	if r.Users[e.adminID]["id"] != e.adminID.String() || r.Members[e.adminID]["permissions"] == nil || r.Members[e.adminID]["user"] != nil {
		t.Fatalf("resolved user/member = %+v / %+v", r.Users, r.Members)
	}
	if c := r.Channels[channelID]; c["name"] != "general" || c["permissions"] == nil {
		t.Fatalf("resolved channel = %+v", r.Channels)
	}
	if r.Roles[77]["name"] != "mods" {
		t.Fatalf("resolved roles = %+v", r.Roles)
	}
	e.expect(invoke(map[string]any{"type": 7, "name": "where", "value": otherChan.String()}), 400, 50035)
	e.expect(invoke(map[string]any{"type": 8, "name": "role", "value": "78"}), 400, 50035)
}

// TestStringContextsAndPartialGuild: command contexts and
// integration_types sent as numeric strings are accepted and returned as
// numbers; a guild interaction carries the partial guild.
func TestStringContextsAndPartialGuild(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Strings")
	e.install(a, 0)
	m := e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/commands", a.ID), a.Token, map[string]any{
		"name": "ctx", "description": "contexts", "contexts": []any{"0", 1}, "integration_types": []any{"0"},
	}), 201, 0)
	if fmt.Sprint(m["contexts"]) != "[0 1]" || fmt.Sprint(m["integration_types"]) != "[0]" {
		t.Fatalf("command = %v", m)
	}
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/applications/%d/commands", a.ID), a.Token, map[string]any{
		"name": "bad", "description": "contexts", "contexts": []any{"x"},
	}), 400, 50035)
	cmd, _ := snowflake.Parse(m["id"].(string))
	e.invoke(a, cmd)
	d := e.dispatch.deliveries()
	var p struct {
		Guild struct {
			ID       snowflake.ID `json:"id"`
			Locale   string       `json:"locale"`
			Features []string     `json:"features"`
		} `json:"guild"`
	}
	if err := json.Unmarshal(d[len(d)-1].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.Guild.ID != guildID || p.Guild.Locale == "" || p.Guild.Features == nil {
		t.Fatalf("partial guild = %+v", p.Guild)
	}
}
