package permissions_test

import (
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/permissions"
	"github.com/concord-chat/concord/runtime/snowflake"
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
		// Overwrites: MANAGE_ROLES in the channel, and only held bits.
		{name: "finding 2: MANAGE_ROLES-only member allows herself MANAGE_MESSAGES",
			g: permissions.Grant{Actor: alice, Channel: general, Need: permissions.ManageRoles, Bits: mm}, missing: mm},
		{name: "allowing a bit she holds in the channel",
			g: permissions.Grant{Actor: alice, Channel: general, Need: permissions.ManageRoles, Bits: permissions.SendMessages | permissions.AddReactions}},
		{name: "denying a bit she lacks is refused too",
			g: permissions.Grant{Actor: alice, Channel: general, Need: permissions.ManageRoles, Bits: permissions.KickMembers}, missing: permissions.KickMembers},
		{name: "a bit held in the guild but denied to her in this channel",
			g: permissions.Grant{Actor: alice, Channel: locked, Need: permissions.ManageRoles, Bits: permissions.SendMessages}, missing: permissions.SendMessages},
		{name: "a bit she lacks in the channel also takes its implied bits (no SEND → no EMBED_LINKS)",
			g: permissions.Grant{Actor: alice, Channel: locked, Need: permissions.ManageRoles, Bits: permissions.EmbedLinks}, missing: permissions.EmbedLinks},
		{name: "without MANAGE_ROLES no overwrite edit",
			g: permissions.Grant{Actor: bob, Channel: general, Need: permissions.ManageRoles, Bits: permissions.SendMessages}, missing: permissions.ManageRoles},
		{name: "MANAGE_ROLES from her own overwrite counts in that channel",
			g: permissions.Grant{Actor: erin, Channel: general, Need: permissions.ManageRoles, Bits: permissions.AddReactions}},
		{name: "but not at guild level",
			g: permissions.Grant{Actor: erin, Need: permissions.ManageRoles, Bits: permissions.AddReactions}, missing: permissions.ManageRoles},
		{name: "administrator grants every bit",
			g: permissions.Grant{Actor: carol, Channel: general, Need: permissions.ManageRoles, Bits: permissions.All}},
		{name: "owner grants every bit",
			g: permissions.Grant{Actor: owner, Channel: locked, Need: permissions.ManageRoles, Bits: permissions.All}},
		{name: "timed-out member grants nothing",
			g: permissions.Grant{Actor: dave, Channel: general, Need: permissions.ManageRoles, Bits: permissions.AddReactions}, missing: permissions.ManageRoles},
		{name: "non-member grants nothing",
			g: permissions.Grant{Actor: stranger, Need: permissions.ManageRoles}, missing: permissions.ManageRoles},
		{name: "unknown channel holds nothing",
			g: permissions.Grant{Actor: alice, Channel: 999, Need: permissions.ManageRoles}, missing: permissions.ManageRoles},

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
