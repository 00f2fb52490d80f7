package cluster

import (
	"context"
	"net/http"
	"testing"

	"github.com/concord-chat/concord/runtime/presence"
)

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
