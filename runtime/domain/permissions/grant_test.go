package permissions_test

import (
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// grantGuild is the guild of the grant tests. Roles by position:
// top(4) admins(3) mods(2) helpers(1) @everyone(0).
//
//	alice: mods — MANAGE_ROLES only (the actor of finding 2)
//	bob:   helpers — no management bit
//	carol: admins — ADMINISTRATOR
//	dave:  mods, timed out
//	erin:  no roles; MANAGE_ROLES only through the member overwrite in general
//	frank: managers — MANAGE_GUILD | KICK_MEMBERS (bot installs)
const (
	helpers  snowflake.ID = 204
	top      snowflake.ID = 205
	managers snowflake.ID = 206
	carol    snowflake.ID = 4
	dave     snowflake.ID = 5
	erin     snowflake.ID = 6
	frank    snowflake.ID = 7
	stranger snowflake.ID = 8
	locked   snowflake.ID = 302 // channel denying SEND_MESSAGES to mods
	category snowflake.ID = 303 // category allowing MANAGE_MESSAGES to mods
	child    snowflake.ID = 304 // channel in category, no overwrites
	perk     snowflake.ID = 305 // channel allowing MANAGE_MESSAGES to mods, bob's overwrite empty
	deleg    snowflake.ID = 306 // channel allowing erin MANAGE_ROLES | MANAGE_MESSAGES
	helpdesk snowflake.ID = 307 // channel allowing helpers MANAGE_ROLES | MANAGE_MESSAGES
)

func grantEngine() *permissions.Engine {
	e := permissions.NewEngine(guild, owner)
	e.SetRole(guild, text)
	for _, r := range []struct {
		id   snowflake.ID
		bits P
		pos  int
	}{
		{helpers, 0, 1},
		{mods, permissions.ManageRoles, 2},
		{managers, permissions.ManageGuild | permissions.KickMembers, 2},
		{admins, permissions.Administrator, 3},
		{top, 0, 4},
	} {
		e.SetRole(r.id, r.bits)
		e.SetRolePosition(r.id, r.pos)
	}
	e.SetOverwrites(general, []permissions.Overwrite{{ID: erin, Member: true, Allow: permissions.ManageRoles}})
	e.SetOverwrites(locked, []permissions.Overwrite{{ID: mods, Deny: permissions.SendMessages}})
	e.SetOverwrites(category, []permissions.Overwrite{{ID: mods, Allow: permissions.ManageMessages}})
	e.SetOverwrites(child, nil)
	e.SetOverwrites(perk, []permissions.Overwrite{{ID: mods, Allow: permissions.ManageMessages}, {ID: bob, Member: true}})
	e.SetOverwrites(deleg, []permissions.Overwrite{{ID: erin, Member: true, Allow: permissions.ManageRoles | permissions.ManageMessages}})
	e.SetOverwrites(helpdesk, []permissions.Overwrite{{ID: helpers, Allow: permissions.ManageRoles | permissions.ManageMessages}})
	e.SetMember(permissions.Member{UserID: owner})
	e.SetMember(permissions.Member{UserID: alice, Roles: []snowflake.ID{mods}})
	e.SetMember(permissions.Member{UserID: bob, Roles: []snowflake.ID{helpers}})
	e.SetMember(permissions.Member{UserID: carol, Roles: []snowflake.ID{admins}})
	e.SetMember(permissions.Member{UserID: dave, Roles: []snowflake.ID{mods}, TimeoutUntil: future})
	e.SetMember(permissions.Member{UserID: erin})
	e.SetMember(permissions.Member{UserID: frank, Roles: []snowflake.ID{managers}})
	return e
}

func TestMayGrant(t *testing.T) {
	mm := permissions.ManageMessages
	tests := []struct {
		name    string
		g       permissions.Grant
		missing P            // want a refusal naming these bits
		role    snowflake.ID // want a hierarchy refusal naming this role
	}{
		// Overwrites: MANAGE_ROLES in the channel, and only bits held in
		// the guild or the parent category, or in the channel when one of
		// its overwrites makes the actor its permission manager.
		{name: "finding 2: MANAGE_ROLES-only member allows herself MANAGE_MESSAGES",
			g: ow(alice, general, 0, mm), missing: mm},
		{name: "allowing a bit she holds in the guild",
			g: ow(alice, general, 0, permissions.SendMessages|permissions.AddReactions)},
		{name: "denying a bit she lacks is refused too",
			g: ow(alice, general, 0, permissions.KickMembers), missing: permissions.KickMembers},
		{name: "a bit held in the guild but denied to her in this channel: the guild is the scope",
			g: ow(alice, locked, 0, permissions.SendMessages)},
		{name: "seed 4650640975562623415: a bit held only through the edited overwrite cannot be moved",
			g: ow(alice, perk, 0, mm), missing: mm},
		{name: "a bit held only through another overwrite of the channel cannot be handed out",
			g: ow(bob, perk, 0, mm), missing: permissions.ManageRoles},
		{name: "nor by a MANAGE_ROLES holder to bob's overwrite",
			g: ow(alice, perk, 0, mm|permissions.SendMessages), missing: mm},
		{name: "a bit held through the parent category counts",
			g: ow(alice, child, category, mm)},
		{name: "the same channel outside the category does not",
			g: ow(alice, child, 0, mm), missing: mm},
		{name: "a new channel in the category: the category is the scope",
			g: ow(alice, category, category, mm)},
		{name: "a new channel at guild level: the guild is the scope",
			g: ow(alice, 0, 0, mm), missing: mm},
		{name: "MANAGE_ROLES overwrite: the channel is the scope, its overwrites included",
			g: ow(erin, deleg, 0, mm|permissions.AddReactions)},
		{name: "MANAGE_ROLES overwrite: still no bit she lacks in the channel",
			g: ow(erin, deleg, 0, mm|permissions.BanMembers), missing: permissions.BanMembers},
		{name: "MANAGE_ROLES overwrite of one of her roles makes the channel the scope",
			g: ow(bob, helpdesk, 0, mm)},
		{name: "MANAGE_ROLES from her own overwrite counts in that channel",
			g: ow(erin, general, 0, permissions.AddReactions)},
		{name: "without MANAGE_ROLES no overwrite edit",
			g: ow(bob, general, 0, permissions.SendMessages), missing: permissions.ManageRoles},
		{name: "but not at guild level",
			g: permissions.Grant{Actor: erin, Need: permissions.ManageRoles, Bits: permissions.AddReactions}, missing: permissions.ManageRoles},
		{name: "administrator grants every bit",
			g: ow(carol, perk, 0, permissions.All)},
		{name: "owner grants every bit",
			g: ow(owner, locked, 0, permissions.All)},
		{name: "timed-out member grants nothing",
			g: ow(dave, general, 0, permissions.AddReactions), missing: permissions.ManageRoles},
		{name: "non-member grants nothing",
			g: permissions.Grant{Actor: stranger, Need: permissions.ManageRoles}, missing: permissions.ManageRoles},
		{name: "unknown channel holds nothing",
			g: ow(alice, 999, 0, 0), missing: permissions.ManageRoles},

		// Roles: guild-level bits, strictly below the actor's highest role.
		{name: "role edit with a held bit on a role below",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Bits: permissions.AddReactions, Roles: []snowflake.ID{helpers}}},
		{name: "role edit handing out a bit she lacks",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Bits: mm | permissions.AddReactions, Roles: []snowflake.ID{helpers}}, missing: mm},
		{name: "role at her own position",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Roles: []snowflake.ID{managers}}, role: managers},
		{name: "her own highest role",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Roles: []snowflake.ID{mods}}, role: mods},
		{name: "role above her",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Roles: []snowflake.ID{helpers, admins}}, role: admins},
		{name: "administrator is still bound by the hierarchy",
			g: permissions.Grant{Actor: carol, Need: permissions.ManageRoles, Roles: []snowflake.ID{top}}, role: top},
		{name: "administrator below her highest",
			g: permissions.Grant{Actor: carol, Need: permissions.ManageRoles, Bits: permissions.All, Roles: []snowflake.ID{mods}}},
		{name: "owner above every role",
			g: permissions.Grant{Actor: owner, Need: permissions.ManageRoles, Bits: permissions.All, Roles: []snowflake.ID{top}}},
		{name: "@everyone ranks below everyone with MANAGE_ROLES",
			g: permissions.Grant{Actor: erin, Channel: general, Need: permissions.ManageRoles, Roles: []snowflake.ID{guild}}},
		{name: "role assignment without MANAGE_ROLES",
			g: permissions.Grant{Actor: bob, Need: permissions.ManageRoles, Roles: []snowflake.ID{guild}}, missing: permissions.ManageRoles},

		// Positions.
		{name: "move a lower role to just below her highest",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Moves: []permissions.Move{{Role: helpers, Position: 1}}}},
		{name: "move a lower role to her own position",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Moves: []permissions.Move{{Role: helpers, Position: 2}}}, role: helpers},
		{name: "move her own role down",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageRoles, Moves: []permissions.Move{{Role: mods, Position: 1}}}, role: mods},
		{name: "administrator moves a role above herself",
			g: permissions.Grant{Actor: carol, Need: permissions.ManageRoles, Moves: []permissions.Move{{Role: mods, Position: 4}}}, role: mods},
		{name: "owner moves any role",
			g: permissions.Grant{Actor: owner, Need: permissions.ManageRoles, Moves: []permissions.Move{{Role: top, Position: 1}}}},
		{name: "nobody moves @everyone, not even the owner",
			g: permissions.Grant{Actor: owner, Need: permissions.ManageRoles, Moves: []permissions.Move{{Role: guild, Position: 3}}}, role: guild},

		// Bot installs: MANAGE_GUILD and every bit of the bot's role.
		{name: "bot install with held bits",
			g: permissions.Grant{Actor: frank, Need: permissions.ManageGuild, Bits: permissions.KickMembers | permissions.ViewChannel}},
		{name: "bot install asking for a bit the installer lacks",
			g: permissions.Grant{Actor: frank, Need: permissions.ManageGuild, Bits: permissions.KickMembers | permissions.BanMembers}, missing: permissions.BanMembers},
		{name: "bot install without MANAGE_GUILD",
			g: permissions.Grant{Actor: alice, Need: permissions.ManageGuild, Bits: permissions.ViewChannel}, missing: permissions.ManageGuild},
	}
	e := grantEngine()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.MayGrant(tt.g, now)
			if tt.missing == 0 && tt.role == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ge *permissions.GrantError
			if !errors.As(err, &ge) || !errors.Is(err, permissions.ErrGrant) {
				t.Fatalf("err = %v, want a *GrantError", err)
			}
			if ge.Missing != tt.missing || ge.Role != tt.role {
				t.Fatalf("refusal = missing %d role %d (%v), want missing %d role %d", ge.Missing, ge.Role, err, tt.missing, tt.role)
			}
		})
	}
}

// ow is the grant of an overwrite edit of channel (in category parent)
// touching bits.
func ow(actor, channel, parent snowflake.ID, bits P) permissions.Grant {
	return permissions.Grant{Actor: actor, Channel: channel, Parent: parent, Need: permissions.ManageRoles, Bits: bits, Overwrites: true}
}

func TestHighestIgnoresDeletedRoles(t *testing.T) {
	e := grantEngine()
	if got := e.Highest(carol); got != 3 {
		t.Fatalf("Highest(carol) = %d, want 3", got)
	}
	e.DeleteRole(admins)
	if got := e.Highest(carol); got != 0 {
		t.Fatalf("Highest(carol) after deleting her role = %d, want 0", got)
	}
	if e.Outranks(carol, 0) || !e.Outranks(owner, 100) || e.Outranks(stranger, -5) {
		t.Fatal("Outranks: deleted role still counts, owner not exempt, or a stranger outranks")
	}
	if got := e.Highest(stranger); got != -1 {
		t.Fatalf("Highest(stranger) = %d, want -1", got)
	}
}

func TestChangedBits(t *testing.T) {
	ow := func(id snowflake.ID, allow, deny P) permissions.Overwrite {
		return permissions.Overwrite{ID: id, Allow: allow, Deny: deny}
	}
	a, b, c, d := P(1), P(2), P(4), P(8)
	tests := []struct {
		name          string
		before, after []permissions.Overwrite
		want          P
	}{
		{"nothing", nil, nil, 0},
		{"new overwrite: all its bits", nil, []permissions.Overwrite{ow(alice, a|b, c)}, a | b | c},
		{"removed overwrite: all its bits", []permissions.Overwrite{ow(alice, a, c)}, nil, a | c},
		{"unchanged bits cost nothing", []permissions.Overwrite{ow(alice, a|b, c)}, []permissions.Overwrite{ow(alice, a|b|d, c)}, d},
		{"allow moved to deny changes both", []permissions.Overwrite{ow(alice, a, 0)}, []permissions.Overwrite{ow(alice, 0, a)}, a},
		{"other targets untouched", []permissions.Overwrite{ow(alice, a, 0), ow(bob, b, 0)}, []permissions.Overwrite{ow(bob, b, 0), ow(alice, a, 0), ow(mods, 0, c)}, c},
		{"member and role with a new allow each", []permissions.Overwrite{ow(mods, a, 0)}, []permissions.Overwrite{ow(mods, a|b, 0), {ID: alice, Member: true, Allow: d}}, b | d},
	}
	for _, tt := range tests {
		if got := permissions.ChangedBits(tt.before, tt.after); got != tt.want {
			t.Errorf("%s: ChangedBits = %d, want %d", tt.name, got, tt.want)
		}
	}
}
