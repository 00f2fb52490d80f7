package api

import (
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The caches expire after the TTL, keep no password hash, and stay
// within their bound however many callers pass through.
func TestCallerCacheBoundsAndExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newCallerCache(5*time.Second, 64, func() time.Time { return now })
	c.putToken("tok", tokenEntry{id: 1, gen: 2, hasGen: true})
	c.putAccount(store.User{ID: 1, Username: "a", PasswordHash: "secret"})
	if e, ok := c.token("tok"); !ok || e.id != 1 || e.gen != 2 {
		t.Fatalf("token = %+v, %v", e, ok)
	}
	if u, ok := c.account(1); !ok || u.PasswordHash != "" || u.Username != "a" {
		t.Fatalf("account = %+v, %v", u, ok)
	}
	now = now.Add(5 * time.Second)
	if _, ok := c.token("tok"); ok {
		t.Fatal("token still cached after the TTL")
	}
	if _, ok := c.account(1); ok {
		t.Fatal("account still cached after the TTL")
	}
	for i := range 1000 {
		c.putToken(strings.Repeat("t", i+1), tokenEntry{id: snowflake.ID(i)})
		c.putAccount(store.User{ID: snowflake.ID(i)})
		if len(c.tokens) > 64 || len(c.accounts) > 64 {
			t.Fatalf("after %d inserts: %d tokens, %d accounts (bound 64)", i+1, len(c.tokens), len(c.accounts))
		}
	}
	if _, ok := c.token(strings.Repeat("t", 1000)); !ok {
		t.Fatal("the newest token was evicted")
	}
	off := newCallerCache(-1, 64, time.Now)
	off.putToken("tok", tokenEntry{id: 1})
	if _, ok := off.token("tok"); ok {
		t.Fatal("a negative TTL caches")
	}
}
