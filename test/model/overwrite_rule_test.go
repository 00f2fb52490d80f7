package model

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

const (
	permBan   = 1 << 2
	permAdmin = 1 << 3
)

// TestOverwriteEditRule runs the overwrite-edit rule (runtime/domain/permissions,
// "Overwrite edits") case by case against the server, the way the model
// states it: the bits an edit touches must be held in the guild, or in the
// parent category, or — when an overwrite of the channel that applies to
// the actor allows MANAGE_ROLES — in the channel itself. The first case is
// what the model test's seed 4650640975562623415 drew.
func TestOverwriteEditRule(t *testing.T) {
	s := startServer(t)
	owner := s.register(t, "owner", false)
	actor := s.register(t, "mod", false)
	ann := s.register(t, "ann", false)
	g, _, code := guildWith(t, s, owner)
	for _, a := range []account{actor, ann} {
		s.must(t, "POST", "/invites/"+code, a.Token, map[string]any{}, nil)
	}
	role := func(name string, bits uint64) snowflake.ID {
		var r idObj
		s.must(t, "POST", fmt.Sprintf("/guilds/%d/roles", g), owner.Token, map[string]any{"name": name, "permissions": strconv.FormatUint(bits, 10)}, &r)
		return r.ID
	}
	mods := role("mods", permRoles)
	admins := role("admins", permAdmin)
	channel := func(name string, typ int, parent snowflake.ID, ows ...map[string]any) snowflake.ID {
		body := map[string]any{"name": name, "type": typ, "permission_overwrites": ows}
		if parent != 0 {
			body["parent_id"] = parent.String()
		}
		var c idObj
		s.must(t, "POST", fmt.Sprintf("/guilds/%d/channels", g), owner.Token, body, &c)
		return c.ID
	}
	roleOw := func(id snowflake.ID, allow, deny uint64) map[string]any {
		return map[string]any{"id": id.String(), "type": 0, "allow": strconv.FormatUint(allow, 10), "deny": strconv.FormatUint(deny, 10)}
	}
	memberOw := func(a account, allow, deny uint64) map[string]any {
		ow := roleOw(a.ID, allow, deny)
		ow["type"] = 1
		return ow
	}
	base := uint64(permView | permSend | permHistory)

	tests := []struct {
		name      string
		admin     bool // the actor holds the admins role instead of mods
		ows       []map[string]any
		category  []map[string]any // non-nil: the channel sits in a category with these overwrites
		put       map[string]any   // the edit: ann's member overwrite
		wantOK    bool
		wantCode  int
		actorRole bool // the actor holds mods (MANAGE_ROLES at guild level)
	}{
		{name: "seed 4650640975562623415: MANAGE_MESSAGES moved from allow to deny on ann's overwrite, held by nobody",
			actorRole: true, ows: []map[string]any{memberOw(ann, base|permManMsg, 0)},
			put: memberOw(ann, base, permManMsg), wantCode: 50013},
		{name: "held only through the actor's own overwrite of the channel",
			actorRole: true, ows: []map[string]any{memberOw(actor, permManMsg, 0)},
			put: memberOw(ann, permManMsg, 0), wantCode: 50013},
		{name: "held only through another overwrite of the channel (the actor's role's)",
			actorRole: true, ows: []map[string]any{roleOw(mods, permManMsg, 0)},
			put: memberOw(ann, permManMsg, 0), wantCode: 50013},
		{name: "held through the parent category",
			actorRole: true, category: []map[string]any{roleOw(mods, permManMsg, 0)},
			put: memberOw(ann, permManMsg, 0), wantOK: true},
		{name: "held in the guild but denied to the actor in the channel",
			actorRole: true, ows: []map[string]any{roleOw(mods, 0, permSend)},
			put: memberOw(ann, permSend, 0), wantOK: true},
		{name: "a MANAGE_ROLES overwrite makes the channel the scope",
			ows: []map[string]any{memberOw(actor, permRoles|permManMsg, 0)},
			put: memberOw(ann, permManMsg, 0), wantOK: true},
		{name: "a MANAGE_ROLES overwrite still grants nothing the actor lacks",
			ows: []map[string]any{memberOw(actor, permRoles|permManMsg, 0)},
			put: memberOw(ann, permBan, 0), wantCode: 50013},
		{name: "MANAGE_ROLES overwrite cannot raise its own holder",
			ows: []map[string]any{memberOw(actor, permRoles, 0)},
			put: memberOw(actor, permRoles|permManMsg, 0), wantCode: 50013},
		{name: "ADMINISTRATOR grants any bit",
			admin: true, put: memberOw(ann, permRoles|permBan|permManMsg, 0), wantOK: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parent snowflake.ID
			if tt.category != nil {
				parent = channel(fmt.Sprintf("cat%d", i), 4, 0, tt.category...)
			}
			ch := channel(fmt.Sprintf("c%d", i), 0, parent, tt.ows...)
			for _, r := range []struct {
				id   snowflake.ID
				want bool
			}{{mods, tt.actorRole}, {admins, tt.admin}} {
				method := "DELETE"
				if r.want {
					method = "PUT"
				}
				s.must(t, method, fmt.Sprintf("/guilds/%d/members/%d/roles/%d", g, actor.ID, r.id), owner.Token, nil, nil)
			}
			target := tt.put["id"].(string)
			r := s.call(t, "PUT", fmt.Sprintf("/channels/%d/permissions/%s", ch, target), actor.Token, tt.put)
			switch {
			case tt.wantOK && !r.ok():
				t.Fatalf("refused: %s", r)
			case !tt.wantOK && (r.ok() || r.code() != tt.wantCode):
				t.Fatalf("answered %s, want code %d", r, tt.wantCode)
			}
			// The owner may make any of these edits.
			if r := s.call(t, "PUT", fmt.Sprintf("/channels/%d/permissions/%s", ch, target), owner.Token, tt.put); !r.ok() {
				t.Fatalf("owner refused: %s", r)
			}
		})
	}
}
