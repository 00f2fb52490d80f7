package guild

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/shed"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/presence"
)

// fakePresences is a PresenceSource the tests set.
type fakePresences struct {
	mu sync.Mutex
	m  map[snowflake.ID]presence.Presence
}

func (f *fakePresences) Get(id snowflake.ID) presence.Presence {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.m[id]; ok {
		return p
	}
	return presence.OfflinePresence()
}

// presenceGuild is a guild with presence enabled: an owner, members m1
// and m2, a bot with GUILD_PRESENCES and one without; large when
// largeThreshold is below its 5 members.
type presenceGuild struct {
	f                *fixture
	id, general      snowflake.ID
	owner, m1, m2    store.User
	botWith, botNo   store.User
	shedder          *shed.Shedder
	src              *fakePresences
	sOwner, s1, s2   event.Session
	sBotWith, sBotNo event.Session
}

func newPresenceGuild(t *testing.T, largeThreshold int, shedCfg shed.Config) *presenceGuild {
	f := newFixture(t)
	sh, err := shed.New(shedCfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &presenceGuild{f: f, shedder: sh, src: &fakePresences{m: map[snowflake.ID]presence.Presence{}}}
	f.svc.EnablePresence(PresenceConfig{Source: g.src, Shedder: sh, Audience: presence.Audience{LargeThreshold: largeThreshold}})
	g.owner, g.m1, g.m2 = f.user("owner", false), f.user("m1", false), f.user("m2", false)
	g.botWith, g.botNo = f.user("botwith", true), f.user("botno", true)
	info := must[GuildInfo](t)(f.svc.CreateGuild(bg, g.owner.ID, "presence"))
	g.id = info.Guild.ID
	for _, u := range []store.User{g.m1, g.m2, g.botWith, g.botNo} {
		if _, _, err := f.svc.Members.Add(bg, g.id, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	chans := must[[]store.Channel](t)(f.svc.Channels.List(bg, g.owner.ID, g.id))
	g.general = chans[0].ID
	g.sOwner = f.session(g.owner, "o1", 0, 1)
	g.s1 = f.session(g.m1, "a1", 0, 1)
	g.s2 = f.session(g.m2, "b1", 0, 1)
	g.sBotWith = f.session(g.botWith, "c1", IntentGuilds|presence.IntentGuildPresences, 1)
	g.sBotNo = f.session(g.botNo, "d1", IntentGuilds, 1)
	return g
}

// online makes a user online and hands the change to the guild.
func (g *presenceGuild) online(u store.User, status presence.Status) {
	p := presence.Presence{Status: status, Activities: []presence.Activity{}, ClientStatus: presence.ClientStatus{Desktop: status}}
	g.src.mu.Lock()
	g.src.m[u.ID] = p
	g.src.mu.Unlock()
	g.f.svc.PresenceChanged(bg, u.ID, p, nil)
	g.sync()
}

// sync waits until the actor ran everything queued before it.
func (g *presenceGuild) sync() {
	if _, err := g.f.svc.GuildInfo(bg, g.owner.ID, g.id); err != nil {
		g.f.t.Fatal(err)
	}
}

func (g *presenceGuild) subscribe(s event.Session, ch snowflake.ID) {
	t := g.f.t
	if err := g.f.svc.LazyRequest(bg, s, memberlist.Request{GuildID: g.id, Channels: map[snowflake.ID][]memberlist.Range{ch: {{0, 99}}}}); err != nil {
		t.Fatal(err)
	}
}

func payloads(ds []delivered, typ string) []string {
	var out []string
	for _, d := range ds {
		if d.Type == typ {
			out = append(out, string(d.Payload))
		}
	}
	return out
}

// TestLargeGuildPresenceAudience: in a large guild PRESENCE_UPDATE goes
// only to sessions whose list ranges show the member and to bots with
// GUILD_PRESENCES; in a small one to every user session.
func TestLargeGuildPresenceAudience(t *testing.T) {
	g := newPresenceGuild(t, 2, shed.Config{})
	g.subscribe(g.s1, g.general)
	g.online(g.m2, presence.Online)
	for s, want := range map[event.SessionID]int{g.s1.ID: 1, g.sBotWith.ID: 1, g.sOwner.ID: 0, g.sBotNo.ID: 0, g.s2.ID: 0} {
		if got := len(payloads(g.f.sink.of(s), "PRESENCE_UPDATE")); got != want {
			t.Errorf("session %s: %d PRESENCE_UPDATE, want %d", s, got, want)
		}
	}
	if n := len(payloads(g.f.sink.of(g.s1.ID), memberlist.DispatchType)); n != 2 { // SYNC, then the insert
		t.Errorf("viewer got %d list updates", n)
	}

	small := newPresenceGuild(t, 250, shed.Config{})
	small.online(small.m2, presence.Idle)
	for s, want := range map[event.SessionID]int{small.s1.ID: 1, small.sOwner.ID: 1, small.s2.ID: 1, small.sBotWith.ID: 1, small.sBotNo.ID: 0} {
		if got := len(payloads(small.f.sink.of(s), "PRESENCE_UPDATE")); got != want {
			t.Errorf("small guild session %s: %d PRESENCE_UPDATE, want %d", s, got, want)
		}
	}
	// GUILD_CREATE of a later session carries the known presence.
	s := small.f.session(small.m1, "a2", 0, 1)
	gc := payloads(small.f.sink.of(s.ID), "GUILD_CREATE")[0]
	if !strings.Contains(gc, `"presences":[{"user":{"id":"`+small.m2.ID.String()+`"},"status":"idle"`) {
		t.Errorf("GUILD_CREATE presences: %s", gc)
	}
}

// TestOverwriteHidingChannelInvalidates: a session whose user loses a
// channel gets INVALIDATE for its ranges, then nothing of that list.
func TestOverwriteHidingChannelInvalidates(t *testing.T) {
	g := newPresenceGuild(t, 2, shed.Config{})
	g.online(g.m1, presence.Online)
	g.subscribe(g.s1, g.general)
	g.subscribe(g.sOwner, g.general)
	if err := g.f.svc.Channels.PutOverwrite(bg, g.owner.ID, g.general, store.Overwrite{ID: g.m1.ID, Type: store.OverwriteMember, Deny: uint64(permissions.ViewChannel)}); err != nil {
		t.Fatal(err)
	}
	g.sync()
	lists := payloads(g.f.sink.of(g.s1.ID), memberlist.DispatchType)
	if len(lists) != 2 || !strings.Contains(lists[1], `"op":"INVALIDATE","range":[0,99]`) {
		t.Fatalf("list updates after losing the channel: %v", lists)
	}
	// The owner still sees the channel: a SYNC of its new list, without m1.
	owner := payloads(g.f.sink.of(g.sOwner.ID), memberlist.DispatchType)
	last := owner[len(owner)-1]
	if !strings.Contains(last, `"op":"SYNC"`) || strings.Contains(last, `"id":"everyone"`) || strings.Contains(last, g.m1.ID.String()) {
		t.Fatalf("owner's list after the overwrite: %v", owner)
	}
	g.online(g.m2, presence.Online)
	if after := payloads(g.f.sink.of(g.s1.ID), memberlist.DispatchType); len(after) != 2 {
		t.Fatalf("list update after INVALIDATE: %v", after[2:])
	}
	if err := g.f.svc.LazyRequest(bg, g.s1, memberlist.Request{GuildID: g.id, Channels: map[snowflake.ID][]memberlist.Range{g.general: {{0, 99}}}}); err == nil {
		t.Fatal("op 14 for a hidden channel accepted")
	}
}

// TestLastSessionDetachRemovesRow: when a member's last session in the
// guild ends, the guild shows them offline at once (the presence role may
// have restarted and never hear of it).
func TestLastSessionDetachRemovesRow(t *testing.T) {
	g := newPresenceGuild(t, 2, shed.Config{})
	g.online(g.m2, presence.Online)
	g.subscribe(g.s1, g.general)
	sync := payloads(g.f.sink.of(g.s1.ID), memberlist.DispatchType)
	if len(sync) != 1 || !strings.Contains(sync[0], g.m2.ID.String()) {
		t.Fatalf("SYNC %v", sync)
	}
	g.f.svc.Disconnect(bg, g.s2)
	g.sync()
	lists := payloads(g.f.sink.of(g.s1.ID), memberlist.DispatchType)
	if len(lists) != 2 || !strings.Contains(lists[1], `"op":"DELETE"`) {
		t.Fatalf("list updates after the last session left: %v", lists)
	}
	var p struct {
		Status string `json:"status"`
	}
	pu := payloads(g.f.sink.of(g.sBotWith.ID), "PRESENCE_UPDATE")
	if err := json.Unmarshal([]byte(pu[len(pu)-1]), &p); err != nil || p.Status != "offline" {
		t.Fatalf("last PRESENCE_UPDATE %s", pu[len(pu)-1])
	}
}

// TestShedUnderPressure: above the bounds presence and member-list
// updates are dropped and counted, messages still go out.
func TestShedUnderPressure(t *testing.T) {
	g := newPresenceGuild(t, 2, shed.Config{MaxAge: 1}) // any queueing is far past the bound
	g.subscribe(g.s1, g.general)
	g.online(g.m2, presence.Online)
	if n := len(payloads(g.f.sink.of(g.sBotWith.ID), "PRESENCE_UPDATE")); n != 0 {
		t.Fatalf("%d presence updates delivered under pressure", n)
	}
	if testutil.ToFloat64(g.shedder.Shed(shed.Presence)) < 1 || testutil.ToFloat64(g.shedder.Shed(shed.MemberList)) < 1 {
		t.Fatalf("shed presence %v, member list %v", testutil.ToFloat64(g.shedder.Shed(shed.Presence)), testutil.ToFloat64(g.shedder.Shed(shed.MemberList)))
	}
	g.f.send(g.owner, g.general, "still delivered")
	g.f.sink.waitFor(t, g.s1.ID, "MESSAGE_CREATE", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
}

// TestPresenceToFriends: a friend's sessions get PRESENCE_UPDATE without
// guild_id, whether or not they share a guild.
func TestPresenceToFriends(t *testing.T) {
	g := newPresenceGuild(t, 250, shed.Config{})
	stranger := g.f.user("friend", false)
	fs := g.f.session(stranger, "f1", 0, 0)
	p := presence.Presence{Status: presence.DND, Activities: []presence.Activity{}, ClientStatus: presence.ClientStatus{Mobile: presence.DND}}
	g.f.svc.PresenceChanged(bg, g.m2.ID, p, []snowflake.ID{stranger.ID})
	got := payloads(g.f.sink.of(fs.ID), "PRESENCE_UPDATE")
	if len(got) != 1 || strings.Contains(got[0], "guild_id") || !strings.Contains(got[0], `"status":"dnd"`) {
		t.Fatalf("friend got %v", got)
	}
}
