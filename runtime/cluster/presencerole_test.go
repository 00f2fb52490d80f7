package cluster

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/snowflake"
)

// TestSessionIndex: a report replaces a node's sessions and leaves other
// nodes' alone; sessions are grouped by node.
func TestSessionIndex(t *testing.T) {
	x := newSessionIndex()
	x.put(presence.SessionState{Session: "a1", UserID: 1, Node: "gw-1"})
	x.put(presence.SessionState{Session: "a2", UserID: 1, Node: "gw-2"})
	x.put(presence.SessionState{Session: "b1", UserID: 2, Node: "gw-1"})
	x.report("gw-1", []presence.SessionState{{Session: "b1", UserID: 2, Node: "gw-1"}, {Session: "c1", UserID: 3, Node: "gw-1"}})
	got := x.sessions([]snowflake.ID{1, 2, 3})
	if !slices.Equal(got["gw-2"], []event.SessionID{"a2"}) || len(got["gw-1"]) != 2 {
		t.Fatalf("sessions after report = %v", got)
	}
	x.remove("a2")
	if got := x.sessions([]snowflake.ID{1}); len(got) != 0 {
		t.Fatalf("sessions of user 1 after remove = %v", got)
	}
}

// TestServePresenceCall: presence.Changed fills the guild node's cache
// (offline drops the entry); forwarded ops that do not parse are 400s;
// other methods fall through.
func TestServePresenceCall(t *testing.T) {
	cache := newPresenceCache()
	ctx := context.Background()
	if status, _, ok, err := servePresenceCall(ctx, nil, cache, callPresenceChanged, []byte(`{`)); !ok || err != nil || status != http.StatusBadRequest {
		t.Fatalf("bad body: %d %v %v", status, ok, err)
	}
	for _, method := range []string{callLazyRequest, callRequestMembers} {
		for _, body := range []string{`{`, `{"session":{},"d":[]}`} {
			if status, _, ok, err := servePresenceCall(ctx, nil, cache, method, []byte(body)); !ok || err != nil || status != http.StatusBadRequest {
				t.Fatalf("%s with %s: %d %v %v", method, body, status, ok, err)
			}
		}
	}
	if _, _, ok, _ := servePresenceCall(ctx, nil, cache, callCanView, nil); ok {
		t.Fatal("readstate method claimed by servePresenceCall")
	}
	cache.set(7, presence.Presence{Status: presence.Idle})
	if got := cache.Get(7).Status; got != presence.Idle {
		t.Fatalf("cached status %q", got)
	}
	cache.set(7, presence.OfflinePresence())
	if got := cache.Get(7).Status; got != presence.Offline {
		t.Fatalf("status after offline %q", got)
	}
}
