package cluster

import (
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

// TestPresenceCache: the guild node's cache keeps the presence node's
// broadcasts; offline drops the entry.
func TestPresenceCache(t *testing.T) {
	cache := newPresenceCache()
	cache.set(7, presence.Presence{Status: presence.Idle})
	if got := cache.Get(7).Status; got != presence.Idle {
		t.Fatalf("cached status %q", got)
	}
	cache.set(7, presence.OfflinePresence())
	if got := cache.Get(7).Status; got != presence.Offline {
		t.Fatalf("status after offline %q", got)
	}
}
