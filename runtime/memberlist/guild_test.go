package memberlist

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/snowflake"
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

// TestGuildSubscribeLimits: too many channels are refused, unknown
// channels skipped.
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
	g.Disconnect("s")
	if g.List(1).Subscribers() != 0 || g.Shows(9) {
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
