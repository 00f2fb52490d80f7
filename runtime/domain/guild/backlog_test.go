package guild

import (
	"fmt"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// messageIDs lists the ids of the MESSAGE_CREATEs among ds.
func messageIDs(t *testing.T, ds []delivered) []snowflake.ID {
	t.Helper()
	var out []snowflake.ID
	for _, m := range messages(t, ds) {
		out = append(out, m.ID)
	}
	return out
}

// TestMovedSessionGetsWhatTheNewOwnerSent: a guild arrives on this node
// (Unload stands for the old actor; the next use loads it afresh) and its
// actor fans out messages before a session's resubscription arrives. The
// session, attached as moved, gets every one it may see, in order, before
// live events and without a GUILD_CREATE (with one first when it asks
// for a refresh); a bot without MESSAGE_CONTENT gets them stripped; a session that was attached to this actor for a
// while gets only those it missed; attaching again sends nothing.
func TestMovedSessionGetsWhatTheNewOwnerSent(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	bot := f.user("bot", true)
	if _, _, err := f.svc.Members.Add(bg, gid, bot.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Unload(bg, gid); err != nil {
		t.Fatal(err)
	}

	m1 := f.send(g.owner, g.general.ID, "one")
	hidden := f.send(g.owner, g.secret.ID, "only the owner sees this")
	w := event.Session{ID: "w-owner", UserID: g.owner.ID, Node: "gw-1"}
	if err := f.svc.AttachSession(bg, gid, w); err != nil {
		t.Fatal(err)
	}
	m2 := f.send(g.owner, g.general.ID, "two")
	if err := f.svc.DetachSession(bg, gid, w); err != nil {
		t.Fatal(err)
	}
	m3 := f.send(g.owner, g.general.ID, "three")

	s := event.Session{ID: "s-member", UserID: g.member.ID, Node: "gw-2"}
	if err := f.svc.AttachMovedSession(bg, gid, s, false); err != nil {
		t.Fatal(err)
	}
	ds := f.sink.of(s.ID)
	if got, want := types(ds), []string{"MESSAGE_CREATE", "MESSAGE_CREATE", "MESSAGE_CREATE"}; !slices.Equal(got, want) {
		t.Fatalf("moved member got %v, want %v", got, want)
	}
	if got, want := messageIDs(t, ds), []snowflake.ID{m1.ID, m2.ID, m3.ID}; !slices.Equal(got, want) {
		t.Fatalf("moved member got messages %v, want %v (not the hidden %v)", got, want, hidden.ID)
	}

	b := event.Session{ID: "b-bot", UserID: bot.ID, Bot: true, Intents: IntentGuilds | IntentGuildMessages, Node: "gw-2"}
	if err := f.svc.AttachMovedSession(bg, gid, b, false); err != nil {
		t.Fatal(err)
	}
	bms := messages(t, f.sink.of(b.ID))
	if len(bms) != 3 {
		t.Fatalf("moved bot got %d messages, want 3: %v", len(bms), types(f.sink.of(b.ID)))
	}
	for _, m := range bms {
		if m.Content != "" {
			t.Fatalf("bot without MESSAGE_CONTENT got content %q in a replayed message", m.Content)
		}
	}

	// Its old owner left the cluster: GUILD_CREATE, then the same.
	r := event.Session{ID: "r-member", UserID: g.member.ID, Node: "gw-3"}
	if err := f.svc.AttachMovedSession(bg, gid, r, true); err != nil {
		t.Fatal(err)
	}
	rds := f.sink.of(r.ID)
	if got, want := types(rds), []string{"GUILD_CREATE", "MESSAGE_CREATE", "MESSAGE_CREATE", "MESSAGE_CREATE"}; !slices.Equal(got, want) {
		t.Fatalf("moved member asking for a refresh got %v, want %v", got, want)
	}

	// The owner's session had m2 live: it gets the others only.
	if err := f.svc.AttachMovedSession(bg, gid, w, false); err != nil {
		t.Fatal(err)
	}
	wds := f.sink.of(w.ID)
	if got, want := messageIDs(t, wds), []snowflake.ID{m2.ID, m1.ID, hidden.ID, m3.ID}; !slices.Equal(got, want) {
		t.Fatalf("owner's session got messages %v, want %v (m2 live, then the ones it missed)", got, want)
	}
	if n := count(wds, "GUILD_CREATE"); n != 1 {
		t.Fatalf("owner's session got %d GUILD_CREATEs, want the one of its first attach", n)
	}

	// Attached already: nothing again. Live events follow the replay.
	if err := f.svc.AttachMovedSession(bg, gid, s, false); err != nil {
		t.Fatal(err)
	}
	m4 := f.send(g.owner, g.general.ID, "four")
	ds = f.sink.of(s.ID)
	if got, want := messageIDs(t, ds), []snowflake.ID{m1.ID, m2.ID, m3.ID, m4.ID}; !slices.Equal(got, want) || count(ds, "GUILD_CREATE") != 0 {
		t.Fatalf("moved member got %v (%v), want messages %v and no GUILD_CREATE", got, types(ds), want)
	}
}

// TestMovedSessionGetsGuildCreateWhenReplayCannotCatchUp: when the new
// owner dispatched a change the backlog does not replay (a channel
// appeared), the moved session gets a fresh GUILD_CREATE and then the
// messages; once the backlog's bound passed, GUILD_CREATE only.
func TestMovedSessionGetsGuildCreateWhenReplayCannotCatchUp(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	if err := f.svc.Unload(bg, gid); err != nil {
		t.Fatal(err)
	}
	m1 := f.send(g.owner, g.general.ID, "one")
	if _, err := f.svc.Channels.Create(bg, g.owner.ID, gid, ChannelSpec{Name: "new", Type: store.ChannelText}); err != nil {
		t.Fatal(err)
	}
	s := event.Session{ID: "s-member", UserID: g.member.ID, Node: "gw-2"}
	if err := f.svc.AttachMovedSession(bg, gid, s, false); err != nil {
		t.Fatal(err)
	}
	ds := f.sink.of(s.ID)
	if got, want := types(ds), []string{"GUILD_CREATE", "MESSAGE_CREATE"}; !slices.Equal(got, want) {
		t.Fatalf("moved member got %v, want %v", got, want)
	}
	if got := messageIDs(t, ds); got[0] != m1.ID {
		t.Fatalf("replayed %v, want %v", got, m1.ID)
	}

	defer func(n int) { moveBacklogMax = n }(moveBacklogMax)
	moveBacklogMax = 2
	if err := f.svc.Unload(bg, gid); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"a", "b", "c"} {
		f.send(g.owner, g.general.ID, c)
	}
	o := event.Session{ID: "o-owner", UserID: g.owner.ID, Node: "gw-2"}
	if err := f.svc.AttachMovedSession(bg, gid, o, false); err != nil {
		t.Fatal(err)
	}
	if got, want := types(f.sink.of(o.ID)), []string{"GUILD_CREATE"}; !slices.Equal(got, want) {
		t.Fatalf("session moved after the backlog's bound got %v, want %v", got, want)
	}
}

// TestMovedSessionReplayMatchesLiveFanout: on the big-guild scenario's
// guild (users passive or not, bots with and without MESSAGE_CONTENT, a
// channel only a role sees), unsliced and sliced, a session attached as
// moved after the events gets what its twin — the same user, intents and
// threshold — attached before them got live: the replay decides by the
// same rules as fan-out, relays included.
func TestMovedSessionReplayMatchesLiveFanout(t *testing.T) {
	for _, sliced := range []bool{false, true} {
		t.Run(fmt.Sprintf("sliced=%v", sliced), func(t *testing.T) {
			r := newSlicedRun(t, sliced)
			svc := r.f.svc
			// The guild arrives here: a fresh actor, the twins attached
			// to it before the events.
			if err := svc.Unload(bg, r.guild); err != nil {
				t.Fatal(err)
			}
			for _, s := range r.sess {
				if err := svc.AttachSession(bg, r.guild, s); err != nil {
					t.Fatal(err)
				}
			}
			if sliced && svc.mustActor(t, r.guild).sliced == nil {
				t.Fatal("the guild is not sliced with 30 sessions")
			}
			gen := r.chans["general"]
			r.post(t, "general", nil, nil)
			r.post(t, "staff", nil, nil)
			r.post(t, "general", []int{7, 8}, []snowflake.ID{r.mods})
			if err := svc.Messages.PublishEvent(bg, r.guild, gen, "MESSAGE_REACTION_ADD", wire.MessageDelete{ID: 1, ChannelID: gen, GuildID: r.guild}, IntentGuildMessageReactions, 0); err != nil {
				t.Fatal(err)
			}
			if err := svc.Messages.PublishEvent(bg, r.guild, gen, "MESSAGE_DELETE", wire.MessageDelete{ID: 1, ChannelID: gen, GuildID: r.guild}, IntentGuildMessages, 0); err != nil {
				t.Fatal(err)
			}
			r.post(t, "staff", []int{2}, nil)
			r.settle(t)

			twins := r.sess
			var moved []event.Session
			for _, s := range twins {
				m := s
				m.ID = "moved-" + s.ID
				if err := svc.AttachMovedSession(bg, r.guild, m, false); err != nil {
					t.Fatal(err)
				}
				moved = append(moved, m)
			}
			r.settle(t)
			r.sess = append(twins, moved...)
			seen := r.seen()
			got := 0
			for i, s := range twins {
				if want, have := seen[s.ID], seen[moved[i].ID]; !slices.Equal(want, have) {
					t.Errorf("%s (bot %v, intents %d): live %q, replayed %q", s.ID, s.Bot, s.Intents, want, have)
				}
				got += len(seen[s.ID])
			}
			if got == 0 {
				t.Fatal("no session received anything: the scenario tests nothing")
			}
		})
	}
}
