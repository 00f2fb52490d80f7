package guildrole

import (
	"testing"

	"github.com/concord-chat/concord/runtime/domain/presence"
)

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
