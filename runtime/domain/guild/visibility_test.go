package guild

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// replayChannels rebuilds the channel set a client holds from its
// GUILD_CREATE and the CHANNEL_CREATE/DELETE that followed.
func replayChannels(t *testing.T, ds []delivered) []snowflake.ID {
	t.Helper()
	set := map[snowflake.ID]bool{}
	for _, d := range ds {
		switch d.Type {
		case "GUILD_CREATE":
			var gc wire.GuildCreate
			if err := json.Unmarshal(d.Payload, &gc); err != nil {
				t.Fatal(err)
			}
			clear(set)
			for _, c := range gc.Channels {
				set[c.ID] = true
			}
		case "CHANNEL_CREATE":
			id := channelIDOf(t, d)
			if set[id] {
				t.Fatalf("CHANNEL_CREATE for a channel already held: %d", id)
			}
			set[id] = true
		case "CHANNEL_DELETE":
			id := channelIDOf(t, d)
			if !set[id] {
				t.Fatalf("CHANNEL_DELETE for a channel not held: %d", id)
			}
			delete(set, id)
		}
	}
	out := make([]snowflake.ID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestVisibilityEventsTrackPermissions applies random role, overwrite and
// membership changes and checks that every session's replayed channel set
// equals what its user can see, after every step.
func TestVisibilityEventsTrackPermissions(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	owner := f.user("owner", false)
	info := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "random"))
	gid := info.Guild.ID
	var roles []store.Role
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("r%d", i)
		roles = append(roles, must[store.Role](t)(f.svc.Roles.Create(bg, owner.ID, gid, RoleSpec{Name: &name})))
	}
	var chans []store.Channel
	for i := 0; i < 4; i++ {
		chans = append(chans, must[store.Channel](t)(f.svc.Channels.Create(bg, owner.ID, gid, ChannelSpec{Name: fmt.Sprintf("c%d", i), Type: store.ChannelText})))
	}
	var users []store.User
	var sessions []event.Session
	for i := 0; i < 3; i++ {
		u := f.user(fmt.Sprintf("u%d", i), false)
		if _, _, err := f.svc.Members.Add(bg, gid, u.ID); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
		sessions = append(sessions, f.session(u, fmt.Sprintf("s%d", i), 0, 1))
	}
	view := uint64(permissions.ViewChannel)
	for step := 0; step < 60; step++ {
		u := users[rng.IntN(len(users))]
		r := roles[rng.IntN(len(roles))]
		c := chans[rng.IntN(len(chans))]
		var err error
		switch rng.IntN(6) {
		case 0:
			err = f.svc.Members.AddRole(bg, owner.ID, gid, u.ID, r.ID)
		case 1:
			err = f.svc.Members.RemoveRole(bg, owner.ID, gid, u.ID, r.ID)
		case 2:
			bits := uint64(permissions.DefaultEveryone)
			if rng.IntN(2) == 0 {
				bits &^= view
			}
			_, err = f.svc.Roles.Modify(bg, owner.ID, gid, gid, RoleSpec{Permissions: &bits})
		case 3:
			o := store.Overwrite{ID: r.ID, Type: store.OverwriteRole}
			if rng.IntN(2) == 0 {
				o.Allow = view
			} else {
				o.Deny = view
			}
			err = f.svc.Channels.PutOverwrite(bg, owner.ID, c.ID, o)
		case 4:
			o := store.Overwrite{ID: u.ID, Type: store.OverwriteMember, Deny: view}
			if rng.IntN(2) == 0 {
				o = store.Overwrite{ID: gid, Type: store.OverwriteRole, Deny: view}
			}
			err = f.svc.Channels.PutOverwrite(bg, owner.ID, c.ID, o)
		case 5:
			err = f.svc.Channels.DeleteOverwrite(bg, owner.ID, c.ID, []snowflake.ID{u.ID, gid, r.ID}[rng.IntN(3)])
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		// Every change is applied and delivered inside the actor before
		// the call returns, so the sink already holds its events.
		for i, s := range sessions {
			want := []snowflake.ID{}
			for _, ch := range must[[]store.Channel](t)(f.svc.Channels.List(bg, users[i].ID, gid)) {
				want = append(want, ch.ID)
			}
			slices.Sort(want)
			got := replayChannels(t, f.sink.of(s.ID))
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, session %s: client holds %v, user sees %v", step, s.ID, got, want)
			}
		}
	}
}
