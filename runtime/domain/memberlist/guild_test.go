package memberlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// fakeViewer answers CanView from a set of hidden (user, channel) pairs.
type fakeViewer struct {
	hidden map[[2]snowflake.ID]bool
}

func (v *fakeViewer) CanView(userID, channelID snowflake.ID) bool {
	return !v.hidden[[2]snowflake.ID{userID, channelID}]
}

func TestGroupKey(t *testing.T) {
	a := []ViewOverwrite{{ID: 1, Deny: true}, {ID: 7, Allow: true}, {ID: 9, Member: true, Allow: true}}
	b := []ViewOverwrite{{ID: 9, Member: true, Allow: true}, {ID: 1, Deny: true}, {ID: 7, Allow: true}, {ID: 3}}
	if GroupKey(a) != GroupKey(b) {
		t.Fatalf("order or irrelevant overwrites changed the key")
	}
	if GroupKey(nil) != EveryoneList || GroupKey([]ViewOverwrite{{ID: 4}}) != EveryoneList {
		t.Fatalf("channel without view overwrites is not %q", EveryoneList)
	}
	variants := [][]ViewOverwrite{
		{{ID: 1, Deny: true}},
		{{ID: 1, Allow: true}},
		{{ID: 1, Member: true, Deny: true}},
		{{ID: 2, Deny: true}},
		{{ID: 1, Deny: true}, {ID: 2, Allow: true}},
	}
	seen := map[string]int{}
	for i, v := range variants {
		k := GroupKey(v)
		if j, dup := seen[k]; dup {
			t.Fatalf("variants %d and %d share key %s", i, j, k)
		}
		seen[k] = i
	}
}

// TestHiddenMemberNeverListed: a member who cannot view a channel never
// appears in that channel's list, even while visible in another list; a
// user who cannot view a channel cannot subscribe to it; losing access
// invalidates the subscription.
func TestHiddenMemberNeverListed(t *testing.T) {
	const public, secret snowflake.ID = 100, 200
	v := &fakeViewer{hidden: map[[2]snowflake.ID]bool{{2, secret}: true, {3, secret}: true}}
	g := NewGuild(guildID, v, nil, GuildConfig{})
	g.SetChannel(public, EveryoneList)
	secretKey := GroupKey([]ViewOverwrite{{ID: guildID, Deny: true}, {ID: 50, Allow: true}})
	g.SetChannel(secret, secretKey)
	if g.Lists() != 2 {
		t.Fatalf("lists = %d", g.Lists())
	}
	for id := snowflake.ID(1); id <= 4; id++ {
		g.Upsert(member(id, string(rune('a'+id)), StatusOnline))
	}
	if _, ok := g.List(secret).Index(2); ok {
		t.Fatalf("hidden member 2 listed in the secret channel's list")
	}
	if _, ok := g.List(public).Index(2); !ok {
		t.Fatalf("member 2 missing from the public list")
	}
	// User 3 cannot subscribe to the secret channel.
	watcher := event.Session{ID: "w3", UserID: 3, Node: "n"}
	d, err := g.Subscribe(watcher, map[snowflake.ID][]Range{secret: {{0, 99}}, public: {{0, 99}}})
	if !errors.Is(err, ErrHiddenChannel) {
		t.Fatalf("err = %v, want ErrHiddenChannel", err)
	}
	for _, vr := range d.Variants {
		if payloadListID(t, vr) == secretKey {
			t.Fatalf("hidden channel's list was sent: %s", vr.Payload)
		}
	}
	// User 1 subscribes to the secret list; member 2 changes status:
	// nothing about 2 reaches the secret list's subscriber.
	s1 := event.Session{ID: "s1", UserID: 1, Node: "n"}
	if _, err := g.Subscribe(s1, map[snowflake.ID][]Range{secret: {{0, 99}}}); err != nil {
		t.Fatal(err)
	}
	d = g.Upsert(member(2, "c", StatusIdle))
	for _, vr := range d.Variants {
		if slices.ContainsFunc(vr.Sessions, func(s event.Session) bool { return s.ID == s1.ID }) {
			t.Fatalf("hidden member's change reached the secret list: %s", vr.Payload)
		}
	}
	// User 1 loses access: INVALIDATE, then no more updates.
	v.hidden[[2]snowflake.ID{1, secret}] = true
	d = g.Refresh()
	found := false
	for _, vr := range d.Variants {
		if slices.ContainsFunc(vr.Sessions, func(s event.Session) bool { return s.ID == s1.ID }) {
			if payloadListID(t, vr) != secretKey || vr.Ops[len(vr.Ops)-1].Op != OpInvalidate {
				t.Fatalf("revoked session got %s", vr.Payload)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("revoked session got no INVALIDATE")
	}
	if _, ok := g.List(secret).Index(1); ok {
		t.Fatalf("member 1 still listed after losing access")
	}
	d = g.Upsert(member(4, "e", StatusDND))
	for _, vr := range d.Variants {
		if slices.ContainsFunc(vr.Sessions, func(s event.Session) bool { return s.ID == s1.ID }) {
			t.Fatalf("revoked session still receives the secret list")
		}
	}
}

// TestGuildSubscribeLimits: too many channels in one request are
// refused, unknown channels skipped, and a session's oldest list is
// evicted when it subscribes to one more than MaxChannels.
func TestGuildSubscribeLimits(t *testing.T) {
	g := NewGuild(guildID, &fakeViewer{}, nil, GuildConfig{MaxChannels: 2})
	for ch := snowflake.ID(1); ch <= 3; ch++ {
		g.SetChannel(ch, GroupKey([]ViewOverwrite{{ID: ch, Allow: true}}))
	}
	g.Upsert(member(9, "x", StatusOnline))
	s := event.Session{ID: "s", UserID: 9, Node: "n"}
	_, err := g.Subscribe(s, map[snowflake.ID][]Range{1: {{0, 9}}, 2: {{0, 9}}, 3: {{0, 9}}, 99: {{0, 9}}})
	if !errors.Is(err, ErrTooManyChannels) {
		t.Fatalf("err = %v", err)
	}
	_, err = g.Subscribe(event.Session{ID: "t", UserID: 9, Node: "n"}, map[snowflake.ID][]Range{99: {{0, 9}}})
	if !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("err = %v", err)
	}
	if g.List(1).Subscribers() != 1 || g.List(2).Subscribers() != 1 || g.List(3).Subscribers() != 0 {
		t.Fatalf("subscribers = %d %d %d", g.List(1).Subscribers(), g.List(2).Subscribers(), g.List(3).Subscribers())
	}
	if got := g.Viewers(9); len(got) != 1 || got[0].ID != "s" {
		t.Fatalf("viewers = %v", got)
	}
	if _, err := g.Subscribe(s, map[snowflake.ID][]Range{3: {{0, 9}}}); err != nil {
		t.Fatal(err)
	}
	if g.List(1).Subscribers() != 0 || g.List(2).Subscribers() != 1 || g.List(3).Subscribers() != 1 {
		t.Fatalf("after eviction: %d %d %d", g.List(1).Subscribers(), g.List(2).Subscribers(), g.List(3).Subscribers())
	}
	g.Disconnect("s")
	if g.List(2).Subscribers() != 0 || g.List(3).Subscribers() != 0 || g.Shows(9) {
		t.Fatalf("disconnect kept subscriptions")
	}
}

func payloadListID(t *testing.T, v Variant) string {
	t.Helper()
	var p struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(v.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// keyViewer hides lists (by key) from users: channels with the same key
// have the same overwrites, hence the same viewers.
type keyViewer struct {
	keys   map[snowflake.ID]string
	hidden map[snowflake.ID]map[string]bool
}

func (v *keyViewer) CanView(userID, channelID snowflake.ID) bool {
	return !v.hidden[userID][v.keys[channelID]]
}

// TestGuildRandomVisibility changes who can see which channels at random
// (then calls Refresh, as the guild actor does after a permission change)
// and checks after every step that each list holds exactly the members
// who can view its channels, and that no session receives anything from
// a list whose channels its user cannot view, except the INVALIDATE that
// revokes it.
func TestGuildRandomVisibility(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	keys := map[snowflake.ID]string{1: "A", 2: "A", 3: "B", 4: "C"}
	v := &keyViewer{keys: keys, hidden: map[snowflake.ID]map[string]bool{}}
	g := NewGuild(guildID, v, []Role{{ID: 70, Position: 1}}, GuildConfig{MaxChannels: 2})
	for ch, k := range keys {
		g.SetChannel(ch, k)
	}
	members := map[snowflake.ID]Member{}
	sessions := map[event.SessionID]event.Session{}
	for i := range 10 {
		s := event.Session{ID: event.SessionID(fmt.Sprint("s", i)), UserID: snowflake.ID(1 + i%6), Node: "n"}
		sessions[s.ID] = s
	}
	for step := range 3000 {
		var d Dispatch
		revoking := false
		switch op := rng.IntN(10); {
		case op < 5:
			id := snowflake.ID(1 + rng.IntN(12))
			var roles []snowflake.ID
			if rng.IntN(3) == 0 {
				roles = []snowflake.ID{70}
			}
			m := member(id, fmt.Sprint("n", rng.IntN(5)), []string{StatusOnline, StatusIdle, StatusOffline}[rng.IntN(3)], roles...)
			members[id] = m
			d = g.Upsert(m)
		case op < 7:
			s := sessions[event.SessionID(fmt.Sprint("s", rng.IntN(10)))]
			ch := snowflake.ID(1 + rng.IntN(4))
			d, _ = g.Subscribe(s, map[snowflake.ID][]Range{ch: {{0, rng.IntN(20)}}})
		default:
			u := snowflake.ID(1 + rng.IntN(12))
			k := []string{"A", "B", "C"}[rng.IntN(3)]
			if v.hidden[u] == nil {
				v.hidden[u] = map[string]bool{}
			}
			v.hidden[u][k] = !v.hidden[u][k]
			d = g.Refresh()
			revoking = true
		}
		for _, vr := range d.Variants {
			key := payloadListID(t, vr)
			invalidate := vr.Ops[0].Op == OpInvalidate
			for _, s := range vr.Sessions {
				if v.hidden[s.UserID][key] && !(revoking && invalidate) {
					t.Fatalf("step %d: session %s (user %d) got list %s it cannot view: %s", step, s.ID, s.UserID, key, vr.Payload)
				}
			}
		}
		for ch, k := range keys {
			l := g.List(ch)
			for id, m := range members {
				_, listed := l.Index(id)
				want := m.Status != StatusOffline && !v.hidden[id][k]
				if listed != want {
					t.Fatalf("step %d: member %d in list %s: %v, want %v", step, id, k, listed, want)
				}
			}
		}
	}
}
