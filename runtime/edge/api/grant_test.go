package api

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

func bitsStr(b permissions.Bits) string { return strconv.FormatUint(uint64(b), 10) }

// grantWorld adds carol, who joined by invite and holds the "managers"
// role (position 1) carrying only the bits given, to the newcomer world.
func (e *env) grantWorld(bits permissions.Bits) (world, account, wire.Role) {
	w := e.world()
	carol := e.register("carol", false)
	e.ok("POST", v10+"/invites/"+w.inviteCode, carol.Token, map[string]any{}, nil)
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)
	var managers wire.Role
	e.ok("POST", g+"/roles", w.alice.Token, map[string]any{"name": "managers", "permissions": bitsStr(bits)}, &managers)
	e.ok("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, carol.ID, managers.ID), w.alice.Token, nil, nil)
	return w, carol, managers
}

// TestOverwriteEscalationRefused is the overwrite escalation: a member whose
// only permission is MANAGE_ROLES puts a member overwrite granting herself
// MANAGE_MESSAGES, then deletes the owner's message. Both must fail with
// 403 50013, and the message must survive.
func TestOverwriteEscalationRefused(t *testing.T) {
	e := newEnv(t)
	w, carol, _ := e.grantWorld(permissions.ManageRoles)
	msg := e.post(w.alice.Token, w.general, map[string]any{"content": "the owner's message"})
	msgPath := fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, msg.ID)
	e.fail("DELETE", msgPath, carol.Token, nil, 403, 50013)

	self := fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.general, carol.ID)
	e.fail("PUT", self, carol.Token, map[string]any{"type": 1, "allow": "8192"}, 403, 50013)
	e.fail("DELETE", msgPath, carol.Token, nil, 403, 50013)
	var still wire.Message
	e.ok("GET", msgPath, w.alice.Token, nil, &still)
	if still.Content != "the owner's message" {
		t.Fatalf("owner's message = %+v", still)
	}
	var ch wire.Channel
	e.ok("GET", fmt.Sprintf("%s/channels/%d", v10, w.general), w.alice.Token, nil, &ch)
	if len(ch.PermissionOverwrites) != 0 {
		t.Fatalf("refused overwrite was stored: %+v", ch.PermissionOverwrites)
	}

	// Denying a bit she lacks is refused as well; a bit she holds is not.
	bob := fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.general, w.bob.ID)
	e.fail("PUT", bob, carol.Token, map[string]any{"type": 1, "deny": bitsStr(permissions.KickMembers)}, 403, 50013)
	e.ok("PUT", self, carol.Token, map[string]any{"type": 1, "allow": bitsStr(permissions.AddReactions)}, nil)
	// Editing an overwrite leaves its other bits alone: adding a held
	// bit to one that carries a bit she lacks is allowed, removing it is not.
	e.ok("PUT", bob, w.alice.Token, map[string]any{"type": 1, "allow": bitsStr(permissions.ManageMessages)}, nil)
	e.ok("PUT", bob, carol.Token, map[string]any{"type": 1, "allow": bitsStr(permissions.ManageMessages | permissions.AddReactions)}, nil)
	e.fail("DELETE", bob, carol.Token, nil, 403, 50013)
	e.fail("PUT", bob, carol.Token, map[string]any{"type": 1, "allow": bitsStr(permissions.AddReactions)}, 403, 50013)
	// The owner (and so ADMINISTRATOR) may grant anything.
	e.ok("DELETE", bob, w.alice.Token, nil, nil)
}

// TestChannelOverwriteEscalationRefused covers the other two ways to set
// overwrites: POST /guilds/{id}/channels and PATCH /channels/{id}.
func TestChannelOverwriteEscalationRefused(t *testing.T) {
	e := newEnv(t)
	w, carol, _ := e.grantWorld(permissions.ManageRoles | permissions.ManageChannels)
	chans := fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID)
	grantSelf := func(b permissions.Bits) []map[string]any {
		return []map[string]any{{"id": carol.ID.String(), "type": 1, "allow": bitsStr(b)}}
	}
	e.ok("POST", chans, carol.Token, map[string]any{"name": "plain", "type": 0}, nil)
	e.fail("POST", chans, carol.Token, map[string]any{"name": "mine", "type": 0, "permission_overwrites": grantSelf(permissions.ManageMessages)}, 403, 50013)
	var own wire.Channel
	e.ok("POST", chans, carol.Token, map[string]any{"name": "mine", "type": 0, "permission_overwrites": grantSelf(permissions.SendMessages)}, &own)

	path := fmt.Sprintf("%s/channels/%d", v10, own.ID)
	e.fail("PATCH", path, carol.Token, map[string]any{"permission_overwrites": grantSelf(permissions.SendMessages | permissions.ManageMessages)}, 403, 50013)
	e.ok("PATCH", path, carol.Token, map[string]any{"permission_overwrites": grantSelf(permissions.SendMessages | permissions.AddReactions)}, nil)
	var got wire.Channel
	e.ok("GET", path, carol.Token, nil, &got)
	if len(got.PermissionOverwrites) != 1 || got.PermissionOverwrites[0].Allow != wire.Bits(permissions.SendMessages|permissions.AddReactions) {
		t.Fatalf("overwrites = %+v", got.PermissionOverwrites)
	}
	// In the new channel she still cannot delete the owner's message.
	msg := e.post(w.alice.Token, own.ID, map[string]any{"content": "owner"})
	e.fail("DELETE", fmt.Sprintf("%s/channels/%d/messages/%d", v10, own.ID, msg.ID), carol.Token, nil, 403, 50013)
}

// TestRoleGrantsAndHierarchy: a MANAGE_ROLES member creates, edits,
// assigns and moves only roles below her highest, with bits she holds.
func TestRoleGrantsAndHierarchy(t *testing.T) {
	e := newEnv(t)
	w, carol, managers := e.grantWorld(permissions.ManageRoles)
	g := fmt.Sprintf("%s/guilds/%d", v10, w.guildID)

	e.fail("POST", g+"/roles", carol.Token, map[string]any{"name": "mods", "permissions": bitsStr(permissions.ManageMessages)}, 403, 50013)
	var helpers wire.Role
	e.ok("POST", g+"/roles", carol.Token, map[string]any{"name": "helpers", "permissions": bitsStr(permissions.AddReactions)}, &helpers)
	if helpers.Position != 1 {
		t.Fatalf("new role at position %d, want 1", helpers.Position)
	}
	// managers moved up to 2 by the new role: helpers is below carol.
	e.fail("PATCH", fmt.Sprintf("%s/roles/%d", g, helpers.ID), carol.Token, map[string]any{"permissions": bitsStr(permissions.AddReactions | permissions.ManageMessages)}, 403, 50013)
	e.ok("PATCH", fmt.Sprintf("%s/roles/%d", g, helpers.ID), carol.Token, map[string]any{"permissions": bitsStr(permissions.AddReactions | permissions.SendMessages)}, nil)
	// Her own highest role is not below her.
	e.fail("PATCH", fmt.Sprintf("%s/roles/%d", g, managers.ID), carol.Token, map[string]any{"name": "renamed"}, 403, 50013)
	e.fail("DELETE", fmt.Sprintf("%s/roles/%d", g, managers.ID), carol.Token, nil, 403, 50013)

	// Assignment follows the hierarchy: helpers yes, managers no.
	e.ok("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, w.bob.ID, helpers.ID), carol.Token, nil, nil)
	e.fail("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, w.bob.ID, managers.ID), carol.Token, nil, 403, 50013)
	e.fail("PATCH", fmt.Sprintf("%s/members/%d", g, w.bob.ID), carol.Token, map[string]any{"roles": []string{helpers.ID.String(), managers.ID.String()}}, 403, 50013)
	e.fail("DELETE", fmt.Sprintf("%s/members/%d/roles/%d", g, carol.ID, managers.ID), carol.Token, nil, 403, 50013)
	e.ok("DELETE", fmt.Sprintf("%s/members/%d/roles/%d", g, w.bob.ID, helpers.ID), carol.Token, nil, nil)

	// Positions: nothing moves to or above her highest role; @everyone
	// never moves, even for the owner.
	e.fail("PATCH", g+"/roles", carol.Token, []map[string]any{{"id": helpers.ID.String(), "position": 2}}, 403, 50013)
	e.fail("PATCH", g+"/roles", carol.Token, []map[string]any{{"id": managers.ID.String(), "position": 1}}, 403, 50013)
	e.fail("PATCH", g+"/roles", w.alice.Token, []map[string]any{{"id": w.guildID.String(), "position": 2}}, 403, 50013)
	var roles []wire.Role
	e.ok("PATCH", g+"/roles", w.alice.Token, []map[string]any{{"id": helpers.ID.String(), "position": 2}}, &roles)
	pos := map[string]int{}
	for _, r := range roles {
		pos[r.Name] = r.Position
	}
	if pos["@everyone"] != 0 || pos["helpers"] != 2 || pos["managers"] != 1 {
		t.Fatalf("positions after the owner's move = %v", pos)
	}
	// helpers is now above carol: she may no longer touch it.
	e.fail("PUT", fmt.Sprintf("%s/members/%d/roles/%d", g, w.bob.ID, helpers.ID), carol.Token, nil, 403, 50013)
	e.fail("PATCH", fmt.Sprintf("%s/roles/%d", g, helpers.ID), carol.Token, map[string]any{"name": "x"}, 403, 50013)
	e.fail("PATCH", g+"/roles", carol.Token, "{}", 400, 50035)
}
