package guild

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// slicedRun is one run of the sliced-guild scenario.
type slicedRun struct {
	f      *fixture
	local  *fanout.Local
	guild  snowflake.ID
	owner  store.User
	users  []store.User
	sess   []event.Session
	chans  map[string]snowflake.ID
	mods   snowflake.ID
	posted int
	last   snowflake.ID
}

// newSlicedRun builds a guild of 61 members, 30 of them online (users
// passive or not, bots with and without MESSAGE_CONTENT, some with an op
// 14 for general), a "staff" channel only the mods role sees, on a
// service that hands sessions to 3 in-process relays above 10 sessions
// (local nil: the owner filters every session).
func newSlicedRun(t *testing.T, sliced bool) *slicedRun {
	r := &slicedRun{f: newFixture(t), chans: make(map[string]snowflake.ID)}
	deps := Deps{Store: r.f.store, Sink: r.f.sink, IDs: r.f.ids, Auth: r.f.auth}
	if sliced {
		r.local = fanout.NewLocal(r.f.sink, 3, 1024)
		t.Cleanup(r.local.Close)
		deps.Slices = r.local
	}
	svc, err := NewService(Config{Now: r.f.clock.Now, SliceThreshold: 10, SliceSize: 10}, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	r.f.svc = svc
	r.owner = r.f.user("owner", false)
	info := must[GuildInfo](t)(svc.CreateGuild(bg, r.owner.ID, "big"))
	r.guild = info.Guild.ID
	for _, c := range must[[]store.Channel](t)(svc.Channels.List(bg, r.owner.ID, r.guild)) {
		r.chans[c.Name] = c.ID
	}
	name := "mods"
	mentionable := true
	r.mods = must[store.Role](t)(svc.Roles.Create(bg, r.owner.ID, r.guild, RoleSpec{Name: &name, Mentionable: &mentionable})).ID
	staff := must[store.Channel](t)(svc.Channels.Create(bg, r.owner.ID, r.guild, ChannelSpec{Name: "staff", Type: store.ChannelText}))
	r.chans["staff"] = staff.ID
	if err := svc.Channels.PutOverwrite(bg, r.owner.ID, staff.ID, store.Overwrite{ID: r.guild, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Channels.PutOverwrite(bg, r.owner.ID, staff.ID, store.Overwrite{ID: r.mods, Type: store.OverwriteRole, Allow: uint64(permissions.ViewChannel)}); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		u := r.f.user(fmt.Sprintf("u%02d", i), i < 30 && i%5 == 0)
		must[store.Member](t)(func() (store.Member, error) { m, _, err := svc.Members.Add(bg, r.guild, u.ID); return m, err }())
		r.users = append(r.users, u)
	}
	for _, i := range []int{1, 2, 3} {
		if err := svc.Members.AddRole(bg, r.owner.ID, r.guild, r.users[i].ID, r.mods); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		u := r.users[i]
		intents := IntentGuilds | IntentGuildMessages | IntentGuildMessageReactions
		if i%10 == 0 {
			intents |= IntentMessageContent
		}
		s := event.Session{ID: event.SessionID(fmt.Sprintf("s%02d", i)), UserID: u.ID, Bot: u.Bot, Intents: intents, Node: fmt.Sprintf("node-%d", i%3)}
		if i%3 == 0 {
			s.LargeThreshold = 250 // the guild is small to it: never passive
		}
		if err := svc.Subscribe(bg, s); err != nil {
			t.Fatal(err)
		}
		r.sess = append(r.sess, s)
		if i%4 == 1 {
			req := memberlist.Request{GuildID: r.guild, Channels: map[snowflake.ID][]memberlist.Range{r.chans["general"]: {{0, 99}}}}
			if err := svc.LazyRequest(bg, s, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// post publishes a message by the owner in channel, mentioning users and
// roles.
func (r *slicedRun) post(t *testing.T, channel string, users []int, roles []snowflake.ID) {
	r.posted++
	ch := r.chans[channel]
	grant := must[SendGrant](t)(r.f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: r.owner.ID, ChannelID: ch}))
	m := store.Message{ID: snowflake.FromTime(time.Now().Add(time.Duration(r.posted) * time.Millisecond)), ChannelID: ch, GuildID: r.guild,
		AuthorID: r.owner.ID, Content: fmt.Sprintf("m%d", r.posted)}
	r.last = m.ID
	wm := wire.MessageFrom(m, wire.UserFrom(r.owner), grant.Member, nil, nil)
	for _, i := range users {
		wm.Mentions = append(wm.Mentions, wire.UserFrom(r.users[i]))
	}
	wm.MentionRoles = roles
	if err := r.f.svc.Messages.Publish(bg, "MESSAGE_CREATE", wm); err != nil {
		t.Fatal(err)
	}
}

// settle waits until the actor ran everything posted before and the
// relays applied what it sent them.
func (r *slicedRun) settle(t *testing.T) {
	if _, err := r.f.svc.Channels.List(bg, r.owner.ID, r.guild); err != nil {
		t.Fatal(err)
	}
	if r.local != nil {
		if err := r.local.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// seen is what each session received after GUILD_CREATE, as
// "TYPE content stripped?" lines, PASSIVE_UPDATE_V1 left out (its timing
// is its own).
func (r *slicedRun) seen() map[event.SessionID][]string {
	out := make(map[event.SessionID][]string)
	for _, s := range r.sess {
		for _, d := range r.f.sink.of(s.ID) {
			if d.Type == "GUILD_CREATE" || d.Type == PassiveUpdateType {
				continue
			}
			var p struct {
				Content *string `json:"content"`
			}
			_ = json.Unmarshal(d.Payload, &p)
			line := d.Type
			if p.Content != nil {
				line += " " + *p.Content
			}
			out[s.ID] = append(out[s.ID], line)
		}
	}
	return out
}

// scenario runs the same events on a run: messages, mentions, a role
// grant and an overwrite racing messages, a reaction and a delete.
func (r *slicedRun) scenario(t *testing.T) {
	svc := r.f.svc
	r.post(t, "general", nil, nil)
	r.post(t, "staff", nil, nil)
	r.post(t, "general", []int{7}, []snowflake.ID{r.mods})
	// u04 gains mods: the next staff message reaches it, never an
	// earlier one.
	if err := svc.Members.AddRole(bg, r.owner.ID, r.guild, r.users[4].ID, r.mods); err != nil {
		t.Fatal(err)
	}
	r.post(t, "staff", nil, nil)
	// mods lose general: the next general message skips them.
	if err := svc.Channels.PutOverwrite(bg, r.owner.ID, r.chans["general"], store.Overwrite{ID: r.mods, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)}); err != nil {
		t.Fatal(err)
	}
	r.post(t, "general", nil, nil)
	gen := r.chans["general"]
	if err := svc.Messages.PublishEvent(bg, r.guild, gen, "MESSAGE_REACTION_ADD", wire.MessageDelete{ID: 1, ChannelID: gen, GuildID: r.guild}, IntentGuildMessageReactions, 0); err != nil {
		t.Fatal(err)
	}
	if err := svc.Messages.PublishEvent(bg, r.guild, gen, "MESSAGE_DELETE", wire.MessageDelete{ID: 1, ChannelID: gen, GuildID: r.guild}, IntentGuildMessages, 0); err != nil {
		t.Fatal(err)
	}
	// Channel lists (decided by the relays in a sliced guild): threads,
	// a private one with a member, general hidden from @everyone and
	// shown again (its threads come back in THREAD_LIST_SYNC), a role's
	// permissions, a channel created and deleted.
	must[store.Channel](t)(func() (store.Channel, error) {
		c, _, err := svc.Threads.Create(bg, r.owner.ID, ThreadSpec{ParentID: gen, Name: "t", Type: store.ChannelPublicThread})
		return c, err
	}())
	priv := must[store.Channel](t)(func() (store.Channel, error) {
		c, _, err := svc.Threads.Create(bg, r.owner.ID, ThreadSpec{ParentID: gen, Name: "p", Type: store.ChannelPrivateThread})
		return c, err
	}())
	if err := svc.Threads.AddMember(bg, r.owner.ID, priv.ID, r.users[5].ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Channels.PutOverwrite(bg, r.owner.ID, gen, store.Overwrite{ID: r.guild, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Channels.DeleteOverwrite(bg, r.owner.ID, gen, r.guild); err != nil {
		t.Fatal(err)
	}
	perms := uint64(permissions.ViewChannel | permissions.ManageThreads)
	if _, err := svc.Roles.Modify(bg, r.owner.ID, r.guild, r.mods, RoleSpec{Permissions: &perms}); err != nil {
		t.Fatal(err)
	}
	news := must[store.Channel](t)(svc.Channels.Create(bg, r.owner.ID, r.guild, ChannelSpec{Name: "news", Type: store.ChannelText}))
	if _, _, err := svc.Channels.Delete(bg, r.owner.ID, news.ID); err != nil {
		t.Fatal(err)
	}
	r.settle(t)
}

// TestSlicedGuildMatchesOwner runs one scenario on a guild whose owner
// filters every session and on one whose sessions three relays own:
// every session gets the same events, in the same order, with the same
// payload variant — permissions changed between events included.
func TestSlicedGuildMatchesOwner(t *testing.T) {
	ref := newSlicedRun(t, false)
	ref.scenario(t)
	sl := newSlicedRun(t, true)
	if sl.f.svc.mustActor(t, sl.guild).sliced == nil {
		t.Fatal("30 sessions above a threshold of 10 did not go to relays")
	}
	sl.scenario(t)
	want, got := ref.seen(), sl.seen()
	// The scenario moves channel lists: the comparison covers them.
	for _, typ := range []string{"CHANNEL_CREATE", "CHANNEL_DELETE", "CHANNEL_UPDATE", "THREAD_CREATE", "THREAD_DELETE", "THREAD_LIST_SYNC"} {
		n := 0
		for _, lines := range want {
			n += slices.Index(lines, typ) + 1
		}
		if n == 0 {
			t.Errorf("no session got %s in the scenario", typ)
		}
	}
	for _, s := range ref.sess {
		if !slices.Equal(want[s.ID], got[s.ID]) {
			t.Errorf("session %s (bot %v, threshold %d):\n owner: %v\nrelays: %v", s.ID, s.Bot, s.LargeThreshold, want[s.ID], got[s.ID])
		}
	}
	// The relays own every session, at most 10 each.
	total := 0
	for _, name := range sl.local.Relays(sl.guild) {
		n := sl.local.Relay(name).Slice(sl.guild).Sessions()
		if n > 10 {
			t.Errorf("relay %s owns %d sessions, more than the slice size", name, n)
		}
		total += n
	}
	if total != len(sl.sess) {
		t.Errorf("relays own %d sessions, want %d", total, len(sl.sess))
	}
	// A passive session that was left out gets PASSIVE_UPDATE_V1 from
	// its relay (s02: a user, default threshold, no op 14).
	sl.f.sink.waitFor(t, "s02", "PASSIVE_UPDATE_V1 from a relay", func(ds []delivered) bool { return count(ds, PassiveUpdateType) > 0 })
}

// TestSlicedRelayDown kills one of three relays: its sessions are re-homed
// on the others and the next message reaches every session that views
// the channel.
func TestSlicedRelayDown(t *testing.T) {
	r := newSlicedRun(t, true)
	r.settle(t)
	r.local.Kill("local-1")
	r.post(t, "general", []int{2}, nil) // lost for local-1's sessions: in flight when it died
	r.post(t, "general", nil, nil)
	r.settle(t)
	a := r.f.svc.mustActor(t, r.guild)
	if a.sliced == nil || slices.Contains(a.sliced.relays, "local-1") {
		t.Fatalf("relays after the kill: %+v", a.sliced)
	}
	total := 0
	for _, name := range r.local.Relays(r.guild) {
		total += r.local.Relay(name).Slice(r.guild).Sessions()
	}
	if total != len(r.sess) {
		t.Fatalf("the remaining relays own %d sessions, want %d", total, len(r.sess))
	}
	for _, s := range r.sess {
		// Not passive (bots and threshold 250) or active in general.
		i := slices.Index(r.sess, s)
		if !s.Bot && s.LargeThreshold == 0 && i%4 != 1 {
			continue
		}
		got := slices.ContainsFunc(r.f.sink.of(s.ID), func(d delivered) bool {
			var p struct {
				ID snowflake.ID `json:"id"`
			}
			return d.Type == "MESSAGE_CREATE" && json.Unmarshal(d.Payload, &p) == nil && p.ID == r.last
		})
		if !got {
			t.Errorf("session %s missed the message after the relay died: %v", s.ID, r.seen()[s.ID])
		}
	}
}

// mustActor returns a loaded guild's actor (tests read its state only
// after settle, while it is idle).
func (s *Service) mustActor(t *testing.T, id snowflake.ID) *Actor {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.actors[id]
	if a == nil {
		t.Fatalf("guild %d not loaded", id)
	}
	return a
}

// TestSlicedGuildMovesNode moves a sliced guild to another guild node (the
// placement ring gave it away: Unload on the old one, the gateways attach
// its sessions on the new one, as guildrole's sweeper and gatewayrole's
// ringBackend do). The relays drop the old owner's slices when it stops
// (none is left behind), the new owner's slices take over, and the
// sessions that were active in general before the move are active in it
// after the gateway replayed their op 14 (transport.RememberFocus):
// the next message reaches every session that got general's messages
// before.
func TestSlicedGuildMovesNode(t *testing.T) {
	r := newSlicedRun(t, true)
	r.post(t, "general", nil, nil)
	r.settle(t)
	gotGeneral := func(s event.Session, id snowflake.ID) bool {
		return slices.ContainsFunc(r.f.sink.of(s.ID), func(d delivered) bool {
			var p struct {
				ID snowflake.ID `json:"id"`
			}
			return d.Type == "MESSAGE_CREATE" && json.Unmarshal(d.Payload, &p) == nil && p.ID == id
		})
	}
	var before []event.Session
	for _, s := range r.sess {
		if gotGeneral(s, r.last) {
			before = append(before, s)
		}
	}
	if len(before) == 0 || len(before) == len(r.sess) {
		t.Fatalf("%d of %d sessions got general's message before the move: the scenario needs passive sessions and viewers", len(before), len(r.sess))
	}

	old := r.f.svc
	if err := old.Unload(bg, r.guild); err != nil {
		t.Fatal(err)
	}
	if err := r.local.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for _, name := range r.local.Relays(r.guild) {
		if gs := r.local.Relay(name).Guilds(); len(gs) != 0 {
			t.Errorf("relay %s keeps slices of guilds %v after their owner unloaded them", name, gs)
		}
	}

	next, err := NewService(Config{Now: r.f.clock.Now, SliceThreshold: 10, SliceSize: 10},
		Deps{Store: r.f.store, Sink: r.f.sink, IDs: r.f.ids, Auth: r.f.auth, Slices: r.local})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	r.f.svc = next
	for i, s := range r.sess {
		if err := next.AttachSession(bg, r.guild, s); err != nil {
			t.Fatal(err)
		}
		if i%4 == 1 { // the op 14 the gateway replays
			req := memberlist.Request{GuildID: r.guild, Channels: map[snowflake.ID][]memberlist.Range{r.chans["general"]: {{0, 99}}}}
			if err := next.LazyRequest(bg, s, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	if next.mustActor(t, r.guild).sliced == nil {
		t.Fatal("the new owner did not hand its 30 sessions to relays")
	}
	r.post(t, "general", nil, nil)
	r.settle(t)
	for _, s := range r.sess {
		if want := slices.Contains(before, s); gotGeneral(s, r.last) != want {
			t.Errorf("session %s (bot %v, threshold %d) got general's message after the move: %v, before: %v", s.ID, s.Bot, s.LargeThreshold, !want, want)
		}
	}
	total := 0
	for _, name := range r.local.Relays(r.guild) {
		total += r.local.Relay(name).Slice(r.guild).Sessions()
	}
	if total != len(r.sess) {
		t.Errorf("relays own %d sessions after the move, want %d", total, len(r.sess))
	}
}

// TestSlicedSessionMovesGatewayNode moves a session of a sliced guild to
// another gateway node (a draining gateway's handoff): its relay delivers
// the guild's later events to the new node, after the marker on the old.
func TestSlicedSessionMovesGatewayNode(t *testing.T) {
	r := newSlicedRun(t, true)
	s := r.sess[3] // threshold 250: gets every general message
	from := s.Node
	if _, err := r.f.svc.MoveSession(bg, r.guild, Move{Session: s.ID, To: "node-new", ID: "m1"}); err != nil {
		t.Fatal(err)
	}
	r.post(t, "general", nil, nil)
	r.settle(t)
	ds := r.f.sink.of(s.ID)
	marker := slices.IndexFunc(ds, func(d delivered) bool { return d.Type == event.MoveMarker })
	if marker < 0 || ds[marker].Node != from {
		t.Fatalf("no move marker on %s: %+v", from, ds)
	}
	last := ds[len(ds)-1]
	if last.Type != "MESSAGE_CREATE" || last.Node != "node-new" {
		t.Fatalf("the message after the move went to %s as %s, want MESSAGE_CREATE on node-new", last.Node, last.Type)
	}
}

// TestSlicedServiceCloseDropsSlices: a guild node that stops (its
// service closes) tells its relays to drop its guilds' slices.
func TestSlicedServiceCloseDropsSlices(t *testing.T) {
	r := newSlicedRun(t, true)
	r.settle(t)
	if err := r.f.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.local.Sync(bg); err != nil {
		t.Fatal(err)
	}
	for _, name := range r.local.Relays(r.guild) {
		if gs := r.local.Relay(name).Guilds(); len(gs) != 0 {
			t.Errorf("relay %s keeps slices of guilds %v after their owner's service closed", name, gs)
		}
	}
}
