package livetest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// friendsOf is a relationships service with fixed answers; users in fail
// make it fail.
type friendsOf struct {
	mu      sync.Mutex
	friends map[snowflake.ID][]snowflake.ID
	fail    map[snowflake.ID]bool
	asked   map[snowflake.ID]int
}

func (f *friendsOf) Friends(_ context.Context, user snowflake.ID) ([]snowflake.ID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[user]++
	if f.fail[user] {
		return nil, errors.New("relationships unavailable")
	}
	return f.friends[user], nil
}

// The friends boost: on a sampled stream, a rest-tier comment reaches its
// author and the viewers who are the author's friends — and nobody else;
// a viewer whose friend list could not be fetched keeps watching, without
// the boost. Each join asks for the viewer's friends once.
func TestFriendsBoost(t *testing.T) {
	start := time.Unix(5_000_000, 0)
	clk := &testClock{now: start}
	rel := &friendsOf{friends: map[snowflake.ID][]snowflake.ID{}, fail: map[snowflake.ID]bool{}, asked: map[snowflake.ID]int{}}
	e := livetest.Start(t, livetest.Backends{Friends: rel}, livetest.Options{RouterNow: clk.Now})
	alice := e.NewUser()
	s := e.CreateStream(alice, "busy")
	f := newFlood(t, e, s.ID)
	f.makeSampled(clk, start)

	poster, friend, stranger, unlucky := e.NewUser(), e.NewUser(), e.NewUser(), e.NewUser()
	rel.mu.Lock()
	rel.friends[friend.ID] = []snowflake.ID{poster.ID}
	rel.friends[unlucky.ID] = []snowflake.ID{poster.ID}
	rel.fail[unlucky.ID] = true
	rel.mu.Unlock()
	watch := func(u livetest.User) *livetest.Viewer {
		v := livetest.Watch(t, e.URL, s.ID, livetest.Auth(u.Token, ""), "")
		v.Next(livetest.Wait, "state")
		return v
	}
	vp, vf, vs, vu := watch(poster), watch(friend), watch(stranger), watch(unlucky)
	e.Eventually(livetest.Wait, func() string {
		rel.mu.Lock()
		defer rel.mu.Unlock()
		for _, u := range []livetest.User{poster, friend, stranger, unlucky} {
			if rel.asked[u.ID] != 1 {
				return "friends not asked once per join yet"
			}
		}
		return ""
	})

	// Two seconds later on the router's clock, a flood of year-old
	// accounts: the first batch tiered after the clock moved has the
	// sample's 5 tokens, and they outscore the poster's hour-old account
	// if its comment rides in that batch; every later batch has no token
	// (the clock stands still). Either way the poster's comment is rest
	// tier, and the creator's, after it, is pinned.
	clk.set(start.Add(12 * time.Second))
	f.feat = &live.Features{AccountAgeS: 365 * 24 * 3600}
	f.fill(55)
	mine := e.Post(poster, s.ID, "rest tier, for my friends", 0)
	end := e.Post(alice, s.ID, "pinned: the creator", 0)
	seen := func(v *livetest.Viewer) map[string]bool {
		got := map[string]bool{}
		for !got[end.ID] {
			for _, c := range v.Comments(1, livetest.Wait) {
				got[c.ID] = true
			}
		}
		return got
	}
	if !seen(vp)[mine.ID] {
		t.Fatal("the author was not shown their own rest-tier comment")
	}
	if !seen(vf)[mine.ID] {
		t.Fatal("the author's friend was not shown the author's rest-tier comment")
	}
	if seen(vs)[mine.ID] {
		t.Fatal("a viewer who is not the author's friend was shown a rest-tier comment")
	}
	if seen(vu)[mine.ID] {
		t.Fatal("a viewer whose friends were never fetched was shown a rest-tier comment")
	}
}
