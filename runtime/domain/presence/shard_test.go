package presence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// TestForgetIsSilent: users moved to another owner are dropped with their
// sessions and pending broadcasts, and nothing is broadcast for them.
func TestForgetIsSilent(t *testing.T) {
	ctx := context.Background()
	s, c, r := newService(t, Config{Window: 5 * time.Second, NodeTTL: time.Hour}, nil)
	for i, u := range []snowflake.ID{1, 2} {
		if err := s.Connect(ctx, SessionState{Session: []event.SessionID{"a", "b"}[i], UserID: u, Node: "g1", Status: Online}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Forget(func(u snowflake.ID) bool { return u == 1 }); n != 1 {
		t.Fatalf("Forget dropped %d users, want 1", n)
	}
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	got := r.take()
	if len(got) != 1 || got[0].user != 1 {
		t.Fatalf("broadcasts after forgetting user 2: %+v, want only user 1's", got)
	}
	if s.Sessions() != 1 || s.Get(2).Status != Offline {
		t.Fatalf("after Forget: %d sessions, user 2 %v; want 1 and offline", s.Sessions(), s.Get(2).Status)
	}
	if err := s.Update(ctx, "b", Update{Status: Idle}); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("update of a forgotten session = %v, want ErrUnknownSession", err)
	}
	// A report naming the node without the forgotten session removes
	// nothing and announces nothing.
	s.Report(ctx, "g1", []SessionState{{Session: "a", UserID: 1, Node: "g1", Status: Online}})
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	if got := r.take(); len(got) != 0 {
		t.Fatalf("report after Forget broadcast %+v", got)
	}
}

// TestDisconnectUserUnknownAnnouncesOffline: a new owner told that a
// session it never knew ended broadcasts the user offline (the guilds
// may still show what the dead owner announced); a known session ends as
// with Disconnect.
func TestDisconnectUserUnknownAnnouncesOffline(t *testing.T) {
	ctx := context.Background()
	s, c, r := newService(t, Config{Window: 5 * time.Second, NodeTTL: time.Hour}, nil)
	s.DisconnectUser(ctx, "gone", 7)
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	got := r.take()
	if len(got) != 1 || got[0].user != 7 || got[0].p.Status != Offline {
		t.Fatalf("broadcasts = %+v, want user 7 offline", got)
	}
	if s.Sessions() != 0 {
		t.Fatalf("%d sessions after an unknown disconnect", s.Sessions())
	}
	// The user has another live session here: nothing to announce.
	if err := s.Connect(ctx, SessionState{Session: "live", UserID: 7, Node: "g1", Status: Online}); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	r.take()
	s.DisconnectUser(ctx, "gone-too", 7)
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	if got := r.take(); len(got) != 0 || s.Get(7).Status != Online {
		t.Fatalf("unknown disconnect of a user online here: broadcasts %+v, status %v", got, s.Get(7).Status)
	}
	s.DisconnectUser(ctx, "live", 7)
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	if got := r.take(); len(got) != 1 || got[0].p.Status != Offline {
		t.Fatalf("known disconnect: broadcasts %+v, want offline", got)
	}
}
