package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// fixture is a guild with channels, roles, members and invites.
type fixture struct {
	state   store.GuildState
	invites []store.Invite
}

func newFixture(owner snowflake.ID, users ...snowflake.ID) fixture {
	g := rid()
	now := ms(time.Now())
	f := fixture{state: store.GuildState{Guild: store.Guild{
		ID: g, Name: "guild " + g.String(), Icon: "abc", OwnerID: owner,
		Description: "a test guild", CreatedAt: now,
	}}}
	cat := store.Channel{ID: rid(), GuildID: g, Type: store.ChannelCategory, Name: "Text", Position: 0}
	f.state.Channels = []store.Channel{
		cat,
		{ID: rid(), GuildID: g, Type: store.ChannelText, Name: "general", Topic: "hi", Position: 1,
			ParentID: cat.ID, NSFW: true, RateLimitPerUser: 5, LastMessageID: rid(),
			Overwrites: []store.Overwrite{
				{ID: g, Type: store.OverwriteRole, Allow: 1 << 10, Deny: 1 << 11},
				{ID: owner, Type: store.OverwriteMember, Allow: 1 << 40},
			}},
		{ID: rid(), GuildID: g, Type: store.ChannelVoice, Name: "voice", Position: 2, Bitrate: 64000, UserLimit: 10,
			RTCRegion: "eu-west"},
	}
	f.state.Roles = []store.Role{
		{ID: g, GuildID: g, Name: "@everyone", Permissions: 0x6_4000_0000},
		{ID: rid(), GuildID: g, Name: "mod", Color: 0xff00ff, Hoist: true, Position: 1,
			Permissions: 1<<63 | 8, Managed: true, Mentionable: true},
	}
	for i, u := range append([]snowflake.ID{owner}, users...) {
		m := store.Member{GuildID: g, UserID: u, JoinedAt: now.Add(time.Duration(i) * time.Second)}
		if i == 1 {
			m.Nick = "nick"
			m.Roles = []snowflake.ID{f.state.Roles[1].ID}
			m.CommunicationDisabledUntil = now.Add(time.Hour)
		}
		f.state.Members = append(f.state.Members, m)
	}
	f.invites = []store.Invite{
		{Code: rname("inv"), GuildID: g, ChannelID: f.state.Channels[1].ID, InviterID: owner, MaxUses: 10, Uses: 1, MaxAge: 86400, CreatedAt: now},
		{Code: rname("inv"), GuildID: g, ChannelID: f.state.Channels[1].ID, InviterID: owner},
	}
	return f
}

func (f fixture) put(t *testing.T, s store.Store) {
	t.Helper()
	ctx := ctxT(t)
	noErr(t, "PutGuild", s.PutGuild(ctx, f.state.Guild))
	for _, c := range f.state.Channels {
		noErr(t, "PutChannel", s.PutChannel(ctx, c))
	}
	for _, r := range f.state.Roles {
		noErr(t, "PutRole", s.PutRole(ctx, r))
	}
	for _, m := range f.state.Members {
		noErr(t, "PutMember", s.PutMember(ctx, m))
	}
	for _, inv := range f.invites {
		noErr(t, "PutInvite", s.PutInvite(ctx, inv))
	}
}

// sortState orders a state's lists by id: adapters may return any order.
func sortState(st store.GuildState) store.GuildState {
	st.Channels = slices.Clone(st.Channels)
	st.Roles = slices.Clone(st.Roles)
	st.Members = slices.Clone(st.Members)
	slices.SortFunc(st.Channels, func(a, b store.Channel) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(st.Roles, func(a, b store.Role) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(st.Members, func(a, b store.Member) int { return cmp.Compare(a.UserID, b.UserID) })
	return st
}

func sortedIDs(ids []snowflake.ID) []snowflake.ID {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func sortedChannels(cs []store.Channel) []store.Channel {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b store.Channel) int { return cmp.Compare(a.ID, b.ID) })
	return cs
}

func mustLoad(t *testing.T, s store.Store, g snowflake.ID) store.GuildState {
	t.Helper()
	st, err := s.LoadGuild(ctxT(t), g)
	noErr(t, "LoadGuild", err)
	return sortState(st)
}

func mustUserGuilds(t *testing.T, s store.Store, u snowflake.ID) []snowflake.ID {
	t.Helper()
	gs, err := s.UserGuilds(ctxT(t), u)
	noErr(t, "UserGuilds", err)
	return sortedIDs(gs)
}

func testGuilds(t *testing.T, s store.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		f := newFixture(rid(), rid(), rid())
		f.put(t, s)
		equal(t, "LoadGuild", mustLoad(t, s, f.state.Guild.ID), sortState(f.state))
		for _, c := range f.state.Channels {
			got, err := s.GetChannel(ctx, c.ID)
			noErr(t, "GetChannel", err)
			equal(t, "GetChannel", got, c)
		}
		for _, inv := range f.invites {
			got, err := s.GetInvite(ctx, inv.Code)
			noErr(t, "GetInvite", err)
			equal(t, "GetInvite", got, inv)
		}
	})

	t.Run("Upserts", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		f := newFixture(rid(), rid())
		f.put(t, s)
		st := f.state
		st.Guild.Name = "renamed"
		st.Channels[1].Topic = "new topic"
		st.Channels[1].Overwrites = st.Channels[1].Overwrites[:1]
		st.Channels[1].LastMessageID = rid()
		st.Channels[2].RTCRegion = "" // the voice channel back to automatic
		st.Roles[1].Permissions = 0
		st.Members[1].Nick = ""
		st.Members[1].Roles = nil
		st.Members[1].CommunicationDisabledUntil = time.Time{}
		noErr(t, "PutGuild", s.PutGuild(ctx, st.Guild))
		noErr(t, "PutChannel", s.PutChannel(ctx, st.Channels[1]))
		noErr(t, "PutChannel", s.PutChannel(ctx, st.Channels[2]))
		noErr(t, "PutRole", s.PutRole(ctx, st.Roles[1]))
		noErr(t, "PutMember", s.PutMember(ctx, st.Members[1]))
		equal(t, "LoadGuild after upserts", mustLoad(t, s, st.Guild.ID), sortState(st))
		got, err := s.GetChannel(ctx, st.Channels[1].ID)
		noErr(t, "GetChannel", err)
		equal(t, "GetChannel after upsert", got, st.Channels[1])
		got, err = s.GetChannel(ctx, st.Channels[2].ID)
		noErr(t, "GetChannel", err)
		equal(t, "GetChannel of the voice channel after upsert", got, st.Channels[2])
	})

	t.Run("DeleteParts", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		owner, u := rid(), rid()
		f := newFixture(owner, u)
		f.put(t, s)
		g := f.state.Guild.ID
		st := f.state

		noErr(t, "DeleteChannel", s.DeleteChannel(ctx, st.Channels[2].ID))
		_, err := s.GetChannel(ctx, st.Channels[2].ID)
		wantErr(t, "GetChannel deleted", err, store.ErrNotFound)
		wantErr(t, "DeleteChannel again", s.DeleteChannel(ctx, st.Channels[2].ID), store.ErrNotFound)
		st.Channels = st.Channels[:2]

		noErr(t, "DeleteRole", s.DeleteRole(ctx, g, st.Roles[1].ID))
		wantErr(t, "DeleteRole again", s.DeleteRole(ctx, g, st.Roles[1].ID), store.ErrNotFound)
		st.Roles = st.Roles[:1]

		noErr(t, "DeleteMember", s.DeleteMember(ctx, g, u))
		wantErr(t, "DeleteMember again", s.DeleteMember(ctx, g, u), store.ErrNotFound)
		st.Members = st.Members[:1]
		equalIDs(t, "UserGuilds of the departed", mustUserGuilds(t, s, u), nil)
		equalIDs(t, "UserGuilds of the owner", mustUserGuilds(t, s, owner), []snowflake.ID{g})

		noErr(t, "DeleteInvite", s.DeleteInvite(ctx, f.invites[0].Code))
		_, err = s.GetInvite(ctx, f.invites[0].Code)
		wantErr(t, "GetInvite deleted", err, store.ErrNotFound)
		wantErr(t, "DeleteInvite again", s.DeleteInvite(ctx, f.invites[0].Code), store.ErrNotFound)

		equal(t, "LoadGuild", mustLoad(t, s, g), sortState(st))
	})

	t.Run("DeleteGuild", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		owner, u := rid(), rid()
		f := newFixture(owner, u)
		keep := newFixture(owner, u)
		f.put(t, s)
		keep.put(t, s)
		g := f.state.Guild.ID
		equalIDs(t, "UserGuilds before", mustUserGuilds(t, s, u), sortedIDs([]snowflake.ID{g, keep.state.Guild.ID}))

		noErr(t, "DeleteGuild", s.DeleteGuild(ctx, g))
		_, err := s.LoadGuild(ctx, g)
		wantErr(t, "LoadGuild deleted", err, store.ErrNotFound)
		wantErr(t, "DeleteGuild again", s.DeleteGuild(ctx, g), store.ErrNotFound)
		for _, c := range f.state.Channels {
			_, err := s.GetChannel(ctx, c.ID)
			wantErr(t, "GetChannel of deleted guild", err, store.ErrNotFound)
		}
		for _, inv := range f.invites {
			_, err := s.GetInvite(ctx, inv.Code)
			wantErr(t, "GetInvite of deleted guild", err, store.ErrNotFound)
		}
		wantErr(t, "DeleteRole of deleted guild", s.DeleteRole(ctx, g, f.state.Roles[1].ID), store.ErrNotFound)
		wantErr(t, "DeleteMember of deleted guild", s.DeleteMember(ctx, g, u), store.ErrNotFound)
		for _, user := range []snowflake.ID{owner, u} {
			equalIDs(t, "UserGuilds after", mustUserGuilds(t, s, user), []snowflake.ID{keep.state.Guild.ID})
		}
		equal(t, "other guild untouched", mustLoad(t, s, keep.state.Guild.ID), sortState(keep.state))

		// The id can be used again from scratch.
		noErr(t, "PutGuild again", s.PutGuild(ctx, f.state.Guild))
		st := mustLoad(t, s, g)
		if len(st.Channels)+len(st.Roles)+len(st.Members) != 0 {
			t.Fatalf("recreated guild inherited state: %+v", st)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		_, err := s.LoadGuild(ctx, rid())
		wantErr(t, "LoadGuild unknown", err, store.ErrNotFound)
		_, err = s.GetChannel(ctx, rid())
		wantErr(t, "GetChannel unknown", err, store.ErrNotFound)
		_, err = s.GetInvite(ctx, rname("nope"))
		wantErr(t, "GetInvite unknown", err, store.ErrNotFound)
		wantErr(t, "DeleteGuild unknown", s.DeleteGuild(ctx, rid()), store.ErrNotFound)
		wantErr(t, "DeleteChannel unknown", s.DeleteChannel(ctx, rid()), store.ErrNotFound)
		wantErr(t, "DeleteInvite unknown", s.DeleteInvite(ctx, rname("nope")), store.ErrNotFound)
		wantErr(t, "DeleteRole unknown", s.DeleteRole(ctx, rid(), rid()), store.ErrNotFound)
		wantErr(t, "DeleteMember unknown", s.DeleteMember(ctx, rid(), rid()), store.ErrNotFound)
		gs, err := s.UserGuilds(ctx, rid())
		noErr(t, "UserGuilds unknown", err)
		equalIDs(t, "UserGuilds unknown", gs, nil)
		cs, err := s.PrivateChannels(ctx, rid())
		noErr(t, "PrivateChannels unknown", err)
		if len(cs) != 0 {
			t.Fatalf("PrivateChannels of an unknown user: %+v", cs)
		}
	})

	t.Run("UserGuilds", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		u := rid()
		var gs []snowflake.ID
		for range 5 {
			g := rid()
			gs = append(gs, g)
			noErr(t, "PutGuild", s.PutGuild(ctx, store.Guild{ID: g, Name: "g", OwnerID: u}))
			noErr(t, "PutMember", s.PutMember(ctx, store.Member{GuildID: g, UserID: u, JoinedAt: ms(time.Now())}))
			noErr(t, "PutMember other", s.PutMember(ctx, store.Member{GuildID: g, UserID: rid()}))
		}
		equalIDs(t, "UserGuilds", mustUserGuilds(t, s, u), sortedIDs(gs))
		// Re-putting a member (an update) does not duplicate the entry.
		noErr(t, "PutMember update", s.PutMember(ctx, store.Member{GuildID: gs[0], UserID: u, Nick: "x"}))
		equalIDs(t, "UserGuilds after update", mustUserGuilds(t, s, u), sortedIDs(gs))
		noErr(t, "DeleteMember", s.DeleteMember(ctx, gs[2], u))
		equalIDs(t, "UserGuilds after leaving", mustUserGuilds(t, s, u), sortedIDs(slices.Delete(slices.Clone(gs), 2, 3)))
	})

	t.Run("PrivateChannels", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		a, b, c := rid(), rid(), rid()
		dm := store.Channel{ID: rid(), Type: store.ChannelDM, Recipients: []snowflake.ID{a, b}, LastMessageID: rid()}
		group := store.Channel{ID: rid(), Type: store.ChannelGroupDM, Name: "friends", OwnerID: a, Recipients: []snowflake.ID{a, b, c}}
		noErr(t, "PutChannel dm", s.PutChannel(ctx, dm))
		noErr(t, "PutChannel group", s.PutChannel(ctx, group))
		private := func(u snowflake.ID) []store.Channel {
			t.Helper()
			cs, err := s.PrivateChannels(ctx, u)
			noErr(t, "PrivateChannels", err)
			return sortedChannels(cs)
		}
		equal(t, "PrivateChannels a", private(a), sortedChannels([]store.Channel{dm, group}))
		equal(t, "PrivateChannels b", private(b), sortedChannels([]store.Channel{dm, group}))
		equal(t, "PrivateChannels c", private(c), []store.Channel{group})
		got, err := s.GetChannel(ctx, group.ID)
		noErr(t, "GetChannel group", err)
		equal(t, "GetChannel group", got, group)

		// c leaves the group, d joins.
		d := rid()
		group.Recipients = []snowflake.ID{a, b, d}
		group.Name = "renamed"
		noErr(t, "PutChannel group update", s.PutChannel(ctx, group))
		equal(t, "PrivateChannels c after leaving", private(c), []store.Channel(nil))
		equal(t, "PrivateChannels d after joining", private(d), []store.Channel{group})
		equal(t, "PrivateChannels a after update", private(a), sortedChannels([]store.Channel{dm, group}))

		noErr(t, "DeleteChannel dm", s.DeleteChannel(ctx, dm.ID))
		equal(t, "PrivateChannels a after delete", private(a), []store.Channel{group})
		equal(t, "PrivateChannels b after delete", private(b), []store.Channel{group})
	})

	t.Run("Invites", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		inv := store.Invite{Code: rname("Ab"), GuildID: rid(), ChannelID: rid(), InviterID: rid(),
			MaxUses: 5, MaxAge: 3600, CreatedAt: ms(time.Now())}
		noErr(t, "PutInvite", s.PutInvite(ctx, inv))
		got, err := s.GetInvite(ctx, inv.Code)
		noErr(t, "GetInvite", err)
		equal(t, "GetInvite", got, inv)
		inv.Uses = 3
		noErr(t, "PutInvite update", s.PutInvite(ctx, inv))
		got, err = s.GetInvite(ctx, inv.Code)
		noErr(t, "GetInvite", err)
		equal(t, "GetInvite after update", got, inv)
		noErr(t, "DeleteInvite", s.DeleteInvite(ctx, inv.Code))
		_, err = s.GetInvite(ctx, inv.Code)
		wantErr(t, "GetInvite deleted", err, store.ErrNotFound)
	})
}
