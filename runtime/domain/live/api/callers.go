package api

import (
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Every POST of a comment checks its token (an HMAC and three base64
// decodings) and reads its author's account from the user store (in
// `concord serve` a Cassandra read: a few milliseconds, tens under load,
// the largest part of the API's own time before the append). A busy
// stream's authors post again within seconds, so both are kept for a
// short time:
//
//   - tokens: a token that verified maps to its user and the token
//     generation it carries, for CallerTTL. Only a token that verified is
//     ever stored, under its exact text, so a forged token never matches.
//   - accounts: a user's account as the store had it, for CallerTTL.
//
// A token reset (the generation bumped in the store) takes effect within
// CallerTTL on every API instance: the account, re-read at least that
// often, must carry the token's generation, and a token older than the
// account's is refused (a newer one makes the account be read again at
// once, so a fresh token works right after a reset). This also covers a
// reset made through another process, whose generation the local token
// issuer may not know. Bans, moderators and stream rules are never
// cached here: the sync filter reads them from the directory on every
// comment. Both maps are bounded by CallerCacheSize entries.

// callerCache holds verified tokens and accounts (see above).
type callerCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu       sync.Mutex
	tokens   map[string]tokenEntry
	accounts map[snowflake.ID]accountEntry
}

type tokenEntry struct {
	id     snowflake.ID
	gen    uint32
	hasGen bool
	exp    time.Time
}

type accountEntry struct {
	u   store.User
	exp time.Time
}

func newCallerCache(ttl time.Duration, max int, now func() time.Time) *callerCache {
	return &callerCache{ttl: ttl, max: max, now: now,
		tokens: map[string]tokenEntry{}, accounts: map[snowflake.ID]accountEntry{}}
}

// token returns the cached verification of token.
func (c *callerCache) token(token string) (tokenEntry, bool) {
	if c.ttl <= 0 {
		return tokenEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.tokens[token]
	if !ok || !c.now().Before(e.exp) {
		return tokenEntry{}, false
	}
	return e, true
}

// putToken remembers that token verified as e.id (e.exp is set here).
func (c *callerCache) putToken(token string, e tokenEntry) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	e.exp = now.Add(c.ttl)
	if len(c.tokens) >= c.max {
		bound(c.tokens, c.max, func(e tokenEntry) bool { return !now.Before(e.exp) })
	}
	// The text is copied: the caller's comes from a request header.
	c.tokens[strings.Clone(token)] = e
}

// dropToken forgets token (its generation turned out to be revoked).
func (c *callerCache) dropToken(token string) {
	c.mu.Lock()
	delete(c.tokens, token)
	c.mu.Unlock()
}

// account returns the cached account of id.
func (c *callerCache) account(id snowflake.ID) (store.User, bool) {
	if c.ttl <= 0 {
		return store.User{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.accounts[id]
	if !ok || !c.now().Before(e.exp) {
		return store.User{}, false
	}
	return e.u, true
}

// putAccount remembers u as read from the store just now; its password
// hash is not kept.
func (c *callerCache) putAccount(u store.User) {
	if c.ttl <= 0 {
		return
	}
	u.PasswordHash = ""
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.accounts) >= c.max {
		bound(c.accounts, c.max, func(e accountEntry) bool { return !now.Before(e.exp) })
	}
	c.accounts[u.ID] = accountEntry{u: u, exp: now.Add(c.ttl)}
}

// bound makes room in a full map: expired entries go first, then
// arbitrary ones (map order) until an eighth of max is free, so a full
// cache is swept once per max/8 inserts rather than on every one.
func bound[K comparable, V any](m map[K]V, max int, expired func(V) bool) {
	for k, v := range m {
		if expired(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) <= max-max/8-1 {
			break
		}
		delete(m, k)
	}
}
