package guild

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// TestShadowCheckCountsCorruptedEngine runs the guild with every decision
// sampled: an intact guild never disagrees; after the engine's copy of the
// secret channel's overwrites is corrupted behind the actor's back (the
// bug the check exists for), the read and the fan-out decisions that
// would leak the channel are both counted as disagreements.
func TestShadowCheckCountsCorruptedEngine(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	f.svc = f.newService(Config{ShadowEvery: 1, Registerer: reg})
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	f.session(g.member, "m1", IntentGuildMessages, 1)
	f.send(g.owner, g.general.ID, "hello")
	f.send(g.owner, g.secret.ID, "secret")
	if _, err := f.svc.AuthorizeRead(bg, g.member.ID, g.secret.ID); !errors.Is(err, ErrMissingAccess) {
		t.Fatalf("member reads the secret channel: %v", err)
	}
	checks := func(d permissions.Decision) float64 {
		n, _ := counterValue(reg, "concord_permissions_shadow_checks_total", string(d))
		return n
	}
	disagreements := func(d permissions.Decision) float64 {
		n, _ := counterValue(reg, "concord_permissions_shadow_disagreements_total", string(d))
		return n
	}
	if checks(permissions.DecisionFanout) == 0 || checks(permissions.DecisionRead) == 0 {
		t.Fatalf("checks fanout=%v read=%v, want both sampled", checks(permissions.DecisionFanout), checks(permissions.DecisionRead))
	}
	if d := disagreements(permissions.DecisionFanout) + disagreements(permissions.DecisionRead); d != 0 {
		t.Fatalf("intact guild: %v disagreements", d)
	}

	// Corrupt the engine: it forgets the secret channel's overwrites while
	// the actor's state (and the store) keep them.
	if err := f.svc.do(bg, gid, func(a *Actor) error {
		a.engine.SetOverwrites(g.secret.ID, nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AuthorizeRead(bg, g.member.ID, g.secret.ID); err != nil {
		t.Fatalf("the corruption did not take (read refused: %v)", err)
	}
	if disagreements(permissions.DecisionRead) < 1 {
		t.Fatal("the corrupted read decision was not counted")
	}
	f.send(g.owner, g.secret.ID, "leaks to the corrupted engine's view")
	// The corrupted engine lets the message through to the member: the
	// leak the check reports.
	f.sink.waitFor(t, "m1", "the leaked MESSAGE_CREATE", func(ds []delivered) bool {
		for _, m := range messages(t, ds) {
			if m.ChannelID == g.secret.ID {
				return true
			}
		}
		return false
	})
	if disagreements(permissions.DecisionFanout) < 1 {
		t.Fatal("the corrupted fan-out decision was not counted")
	}
}

// counterValue reads one labelled series of a counter vector.
func counterValue(reg *prometheus.Registry, name, decision string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "decision" && l.GetValue() == decision {
					return m.GetCounter().GetValue(), nil
				}
			}
		}
	}
	return 0, nil
}

// TestInstallBotChecksInstaller: the install and the installer's grant
// check happen in one guild step; a manager may hand the bot only bits she
// holds, a member without MANAGE_GUILD nothing.
func TestInstallBotChecksInstaller(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	bot := f.user("robot", true)
	name, bits := "managers", uint64(permissions.ManageGuild|permissions.KickMembers)
	managers := must[store.Role](t)(f.svc.Roles.Create(bg, g.owner.ID, gid, RoleSpec{Name: &name, Permissions: &bits}))
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, managers.ID); err != nil {
		t.Fatal(err)
	}
	outsider := f.user("outsider", false)
	for _, tc := range []struct {
		who  store.User
		bits permissions.Bits
		want error
	}{
		{g.member, permissions.KickMembers | permissions.BanMembers, ErrMissingPermissions},
		{g.member, permissions.Administrator, ErrMissingPermissions},
		{outsider, permissions.ViewChannel, ErrMissingAccess},
	} {
		if _, err := f.svc.Bots.Install(bg, tc.who.ID, gid, bot.ID, "Robot", tc.bits); !errors.Is(err, tc.want) {
			t.Fatalf("install by %s with %d: %v, want %v", tc.who.Username, tc.bits, err, tc.want)
		}
	}
	if _, err := f.svc.Members.Get(bg, g.owner.ID, gid, bot.ID); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("a refused install left the bot a member: %v", err)
	}
	roleID := must[snowflake.ID](t)(f.svc.Bots.Install(bg, g.member.ID, gid, bot.ID, "Robot", permissions.KickMembers|permissions.ViewChannel))
	// Re-authorising with more than she holds is refused and changes nothing.
	if _, err := f.svc.Bots.Install(bg, g.member.ID, gid, bot.ID, "Robot", permissions.BanMembers); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("re-install with BAN_MEMBERS: %v", err)
	}
	for _, r := range must[[]store.Role](t)(f.svc.Roles.List(bg, g.owner.ID, gid)) {
		if r.ID == roleID && r.Permissions != uint64(permissions.KickMembers|permissions.ViewChannel) {
			t.Fatalf("bot role = %+v", r)
		}
	}
	// The bot's managed role carries granted bits: nobody, not even the
	// owner, hands it to a member by hand.
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, roleID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("owner assigns the managed role: %v", err)
	}
	roles := []snowflake.ID{managers.ID, roleID}
	if _, err := f.svc.Members.Modify(bg, g.owner.ID, gid, g.member.ID, MemberPatch{Roles: &roles}); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("owner patches the managed role onto a member: %v", err)
	}
	if err := f.svc.Members.RemoveRole(bg, g.owner.ID, gid, bot.ID, roleID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("owner removes the bot's managed role: %v", err)
	}
}

// TestRolePositionsAcrossGaps: renumbering after a deleted role can carry
// a moved role above the caller even though the position she asked for is
// below her; the final order is checked too, and nothing moves.
func TestRolePositionsAcrossGaps(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild() // vip at 1
	gid := g.guild.Guild.ID
	mk := func(name string, bits permissions.Bits) store.Role {
		b := uint64(bits)
		return must[store.Role](t)(f.svc.Roles.Create(bg, g.owner.ID, gid, RoleSpec{Name: &name, Permissions: &b}))
	}
	// Each new role lands at 1 and pushes the others up, so the order
	// low 1, gap 2, managers 3, vip 4 is set explicitly.
	low := mk("low", 0)
	gap := mk("gap", 0)
	managers := mk("managers", permissions.ManageRoles)
	if _, err := f.svc.Roles.ModifyPositions(bg, g.owner.ID, gid, []RoleMove{{low.ID, 1}, {gap.ID, 2}, {managers.ID, 3}, {g.vip.ID, 4}}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, managers.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Roles.Delete(bg, g.owner.ID, gid, gap.ID); err != nil {
		t.Fatal(err)
	}
	positions := func() map[snowflake.ID]int {
		out := map[snowflake.ID]int{}
		for _, r := range must[[]store.Role](t)(f.svc.Roles.List(bg, g.owner.ID, gid)) {
			out[r.ID] = r.Position
		}
		return out
	}
	before := positions()
	if before[low.ID] != 1 || before[managers.ID] != 3 || before[g.vip.ID] != 4 {
		t.Fatalf("setup positions = %v", before)
	}
	// Position 2 is below her highest (3), but renumbering 1..n would
	// give low 2 and managers 1: low would end above her.
	_, err := f.svc.Roles.ModifyPositions(bg, g.member.ID, gid, []RoleMove{{low.ID, 2}})
	if !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("move across the gap: %v, want ErrMissingPermissions", err)
	}
	if after := positions(); after[low.ID] != before[low.ID] || after[managers.ID] != before[managers.ID] {
		t.Fatalf("a refused move changed positions: %v → %v", before, after)
	}
	// Her hierarchy is intact: she still outranks low.
	if err := f.svc.Members.AddRole(bg, g.member.ID, gid, g.owner.ID, low.ID); err != nil {
		t.Fatalf("assign low after the refused move: %v", err)
	}
	// The owner's same move renumbers without gaps.
	if _, err := f.svc.Roles.ModifyPositions(bg, g.owner.ID, gid, []RoleMove{{low.ID, 2}}); err != nil {
		t.Fatal(err)
	}
	if p := positions(); p[managers.ID] != 1 || p[low.ID] != 2 || p[g.vip.ID] != 3 || p[gid] != 0 {
		t.Fatalf("owner's move: %v", p)
	}
}
