package api

import (
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// nonceCache implements enforce_nonce: the first send with an (author,
// channel, nonce) triple reserves it; later sends within the window wait
// for the first to finish and get its message instead of creating one.
// The channel is part of the key, so a nonce reused in another channel is
// a new send there (authorised as any send), never a replay of a message
// from elsewhere; the replay itself is rendered by the reader, which
// decides visibility at the time of the replay.
type nonceCache struct {
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[nonceKey]*nonceEntry
	sweep   time.Time
}

type nonceKey struct {
	author  snowflake.ID
	channel snowflake.ID
	nonce   string
}

type nonceEntry struct {
	done    chan struct{}
	message snowflake.ID // 0 when the first send failed
	at      time.Time
}

func newNonceCache(window time.Duration, now func() time.Time) *nonceCache {
	return &nonceCache{window: window, now: now, entries: make(map[nonceKey]*nonceEntry)}
}

// reserve returns (nil, true) when the caller owns the nonce and must call
// finish, or the existing entry (false) to wait on.
func (c *nonceCache) reserve(author, channel snowflake.ID, nonce string) (*nonceEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.sweep) > c.window {
		for k, e := range c.entries {
			if e.message != 0 && now.Sub(e.at) > c.window {
				delete(c.entries, k)
			}
		}
		c.sweep = now
	}
	k := nonceKey{author, channel, nonce}
	if e, ok := c.entries[k]; ok {
		select {
		case <-e.done:
			if e.message != 0 && now.Sub(e.at) <= c.window {
				return e, false
			}
			// Expired: reserve anew.
		default:
			return e, false // the first send is still running
		}
	}
	c.entries[k] = &nonceEntry{done: make(chan struct{}), at: now}
	return nil, true
}

// finish records the outcome of a reserved send (message 0 on failure,
// which frees the nonce for a retry).
func (c *nonceCache) finish(author, channel snowflake.ID, nonce string, message snowflake.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := nonceKey{author, channel, nonce}
	e := c.entries[k]
	if e == nil {
		return
	}
	e.message, e.at = message, c.now()
	close(e.done)
	if message == 0 {
		delete(c.entries, k)
	}
}
