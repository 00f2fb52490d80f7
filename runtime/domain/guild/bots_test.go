package guild

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// TestInstallBot installs a bot with a managed role, checks that its
// permissions are the role's under the guild's engine and hierarchy, that
// narrowing the role applies to the next call, and that uninstalling
// removes the member, the role and the bot's subscriptions.
func TestInstallBot(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	bot := f.user("robot", true)
	bs := f.session(bot, "b1", 0, 0)

	bits := permissions.KickMembers | permissions.ViewChannel | permissions.SendMessages
	roleID := must[snowflake.ID](t)(f.svc.Bots.Install(bg, g.owner.ID, gid, bot.ID, "Robot", bits))
	f.sink.waitFor(t, bs.ID, "GUILD_CREATE after install", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == 1 })
	m := must[store.Member](t)(f.svc.Members.Get(bg, g.owner.ID, gid, bot.ID))
	if len(m.Roles) != 1 || m.Roles[0] != roleID {
		t.Fatalf("bot member roles %v, want [%d]", m.Roles, roleID)
	}
	var role store.Role
	for _, r := range must[[]store.Role](t)(f.svc.Roles.List(bg, g.owner.ID, gid)) {
		if r.ID == roleID {
			role = r
		}
	}
	if !role.Managed || role.Name != "Robot" || role.Permissions != uint64(bits) || role.Position != 1 {
		t.Fatalf("managed role = %+v", role)
	}

	// Channel permissions come from the same engine: the secret channel
	// denies @everyone and the bot's role has no overwrite there.
	p := must[permissions.Bits](t)(f.svc.Bots.ChannelPermissions(bg, bot.ID, g.general.ID))
	if !p.Has(permissions.SendMessages | permissions.KickMembers) {
		t.Fatalf("bot permissions in general %#x", uint64(p))
	}
	if p := must[permissions.Bits](t)(f.svc.Bots.ChannelPermissions(bg, bot.ID, g.secret.ID)); p.Has(permissions.ViewChannel) {
		t.Fatalf("bot sees the secret channel: %#x", uint64(p))
	}
	if _, err := f.svc.Bots.ChannelPermissions(bg, g.owner.ID+1000, g.general.ID); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("permissions of a non-member: %v", err)
	}

	// Hierarchy: the bot's role sits at 1, vip above it.
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Members.Remove(bg, bot.ID, gid, g.member.ID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("bot kicking a member ranked above it: %v", err)
	}

	// Installing again narrows the same role; the next call sees it.
	again := must[snowflake.ID](t)(f.svc.Bots.Install(bg, g.owner.ID, gid, bot.ID, "Robot", permissions.ViewChannel))
	if again != roleID {
		t.Fatalf("reinstall made role %d, want %d", again, roleID)
	}
	plain := f.user("plain", false)
	if _, _, err := f.svc.Members.Add(bg, gid, plain.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Members.Remove(bg, bot.ID, gid, plain.ID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("kick after KICK_MEMBERS was narrowed away: %v", err)
	}

	// Uninstall: member and role gone, the bot's session told and detached.
	if err := f.svc.Bots.Uninstall(bg, gid, bot.ID); err != nil {
		t.Fatal(err)
	}
	f.sink.waitFor(t, bs.ID, "GUILD_DELETE", func(ds []delivered) bool { return count(ds, "GUILD_DELETE") == 1 })
	if _, err := f.svc.Members.Get(bg, g.owner.ID, gid, bot.ID); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("uninstalled bot still a member: %v", err)
	}
	for _, r := range must[[]store.Role](t)(f.svc.Roles.List(bg, g.owner.ID, gid)) {
		if r.ID == roleID {
			t.Fatalf("managed role %d survived the uninstall", roleID)
		}
	}
	if _, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: bot.ID, ChannelID: g.general.ID}); !errors.Is(err, ErrMissingAccess) {
		t.Fatalf("send after uninstall: %v", err)
	}
	if err := f.svc.Bots.Uninstall(bg, gid, bot.ID); err != nil {
		t.Fatalf("uninstalling twice: %v", err)
	}
}

// TestKickedBotRoleIsDeleted checks that a managed role nobody holds after
// a kick is removed by DeleteOrphanManagedRoles, and only that one.
func TestKickedBotRoleIsDeleted(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	bot := f.user("kicked", true)
	other := f.user("stays", true)
	kickedRole := must[snowflake.ID](t)(f.svc.Bots.Install(bg, g.owner.ID, gid, bot.ID, "Kicked", permissions.ViewChannel))
	keptRole := must[snowflake.ID](t)(f.svc.Bots.Install(bg, g.owner.ID, gid, other.ID, "Stays", permissions.ViewChannel))
	if err := f.svc.Members.Remove(bg, g.owner.ID, gid, bot.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Bots.DeleteOrphanManagedRoles(bg, gid); err != nil {
		t.Fatal(err)
	}
	have := map[snowflake.ID]bool{}
	for _, r := range must[[]store.Role](t)(f.svc.Roles.List(bg, g.owner.ID, gid)) {
		have[r.ID] = true
	}
	if have[kickedRole] || !have[keptRole] || !have[g.vip.ID] {
		t.Fatalf("roles after the kick %v: want %d gone, %d and vip kept", have, kickedRole, keptRole)
	}
}

// TestDispatchToUserShard checks that a user dispatch for a guild reaches
// only the session on the guild's shard, a DM's only shard 0, and an
// unsharded session always.
func TestDispatchToUserShard(t *testing.T) {
	f := newFixture(t)
	bot := f.user("sharded", true)
	var sessions []event.Session
	for i := range 2 {
		s := event.Session{ID: event.SessionID("s" + string(rune('0'+i))), UserID: bot.ID, Bot: true, ShardID: i, ShardCount: 2, Node: "node-1"}
		if err := f.svc.Subscribe(bg, s); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	payload := json.RawMessage(`{"x":1}`)
	for _, gid := range []snowflake.ID{1 << 22, 2 << 22} {
		if n := f.svc.Bots.DispatchToUserShard(bg, bot.ID, gid, "INTERACTION_CREATE", payload); n != 1 {
			t.Fatalf("guild %d: delivered to %d sessions, want 1", gid, n)
		}
		want := sessions[int((uint64(gid)>>22)%2)]
		f.sink.waitFor(t, want.ID, "INTERACTION_CREATE", func(ds []delivered) bool { return count(ds, "INTERACTION_CREATE") >= 1 })
	}
	if n := f.svc.Bots.DispatchToUserShard(bg, bot.ID, 0, "DM_EVENT", payload); n != 1 {
		t.Fatalf("DM event delivered to %d sessions, want 1", n)
	}
	f.sink.waitFor(t, sessions[0].ID, "DM_EVENT on shard 0", func(ds []delivered) bool { return count(ds, "DM_EVENT") == 1 })
	if got := count(f.sink.of(sessions[1].ID), "DM_EVENT"); got != 0 {
		t.Fatalf("shard 1 got %d DM events", got)
	}
	for _, s := range sessions {
		if got := count(f.sink.of(s.ID), "INTERACTION_CREATE"); got != 1 {
			t.Fatalf("session %s got %d INTERACTION_CREATE, want 1", s.ID, got)
		}
	}
	user := f.user("person", false)
	us := event.Session{ID: "u1", UserID: user.ID, Node: "node-1"}
	if err := f.svc.Subscribe(bg, us); err != nil {
		t.Fatal(err)
	}
	if n := f.svc.Bots.DispatchToUserShard(bg, user.ID, 3<<22, "X", payload); n != 1 {
		t.Fatalf("unsharded session: delivered to %d, want 1", n)
	}
	if got := len(f.svc.Bots.UserSessions(bot.ID)); got != 2 {
		t.Fatalf("UserSessions = %d, want 2", got)
	}
}
