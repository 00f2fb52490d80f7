// Package counters is the port for Concord's approximate, expiring
// counters: REST rate-limit buckets, the invalid-request tally and its
// timed bans, and identify admission at the gateway. They are the
// "counters" class of state: regional, never replicated across
// regions, and allowed to be lost.
//
// Two adapters implement Counters and pass one conformance suite
// (counters/counterstest): counters/redis (Redis through go-redis) for
// production and counters/mem (sharded in-process maps) for `concord dev`
// and unit tests.
//
// # Contract
//
// Namespaces. Incr/Get counters, Take buckets and bans live in three
// separate key spaces: the same key string names three unrelated things.
// Keys are opaque strings; callers put the route, the major parameter and
// the principal in them.
//
// Atomicity. Each call is atomic on its key: concurrent Incr calls never
// lose an increment, and concurrent Take calls on one bucket never admit
// more than the bucket allows (Redis runs each Take as one Lua script; mem
// holds the key's shard lock). Nothing is atomic across calls or keys.
//
// Fixed windows. Incr creates a missing key with value by and expiry ttl;
// later increments add to it without moving the expiry, so a counter counts
// one fixed window that starts at its first increment.
//
// Buckets. Take is a generic cell rate algorithm (GCRA): a bucket of limit
// tokens refilled evenly over window, one token per window/limit. A full
// bucket admits a burst of limit; after that one request per window/limit.
// The caller passes now, so a bucket's arithmetic follows the caller's clock:
// API nodes sharing a Redis must keep their clocks in sync, and a skew of d
// gives a node at most d/(window/limit) extra tokens. Times are kept in whole
// microseconds.
//
// Loss. Counters are not durable. A Redis failover, a restart of the mem
// adapter or an eviction forgets counts: buckets start full again and
// windows restart, so a client briefly gets more than its limit (at most one
// extra burst per lost bucket, one extra window of invalid requests per lost
// tally) and a lost ban ends early. Rate limiting accepts this over-allowance; no
// caller may use counters where overshoot has a direct cost (billing). An
// adapter that cannot reach its store returns ErrUnavailable; rate limiting
// then fails open (see runtime/edge/ratelimit).
package counters

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Adapters wrap them (errors.Is works) and never return a
// raw client error.
var (
	// ErrInvalid reports an invalid argument: an empty key, a negative or
	// zero ttl, a limit or window below one.
	ErrInvalid = errors.New("counters: invalid argument")
	// ErrUnavailable means the store could not be reached or did not answer
	// in time; the outcome of a write is unknown.
	ErrUnavailable = errors.New("counters: unavailable")
	// ErrClosed is returned by calls on closed Counters.
	ErrClosed = errors.New("counters: closed")
)

// Decision is the outcome of one Take.
type Decision struct {
	// Allowed reports whether a token was taken.
	Allowed bool
	// Limit is the bucket's size, as passed to Take.
	Limit int
	// Remaining is how many more requests the bucket would admit right now,
	// after this one.
	Remaining int
	// ResetAfter is how long until the bucket is full again (Remaining back
	// to Limit) if nothing more is taken.
	ResetAfter time.Duration
	// RetryAfter is how long until the next token, zero when Remaining > 0.
	// For a denied Take it is when retrying can succeed.
	RetryAfter time.Duration
}

// Counters holds expiring counters, rate buckets and bans. Every method is
// safe for concurrent use and takes ctx first; see the package contract for
// what is atomic and what may be lost.
type Counters interface {
	// Incr atomically adds by (which may be negative) to the counter at key
	// and returns the new value. A missing or expired key starts at zero and
	// expires ttl after this increment; later increments keep that expiry
	// (a fixed window).
	Incr(ctx context.Context, key string, by int64, ttl time.Duration) (int64, error)
	// Get returns the value of the counter at key, zero if it is missing or
	// expired.
	Get(ctx context.Context, key string) (int64, error)
	// Take atomically takes one token from the bucket at key, which holds
	// limit tokens and refills them evenly over window, as of now.
	Take(ctx context.Context, key string, limit int, window time.Duration, now time.Time) (Decision, error)
	// Ban marks key banned for ttl from now. A ban that already runs longer
	// is kept; a shorter one is extended.
	Ban(ctx context.Context, key string, ttl time.Duration) error
	// Banned returns the longest remaining ban among keys, zero if none of
	// them is banned.
	Banned(ctx context.Context, keys ...string) (time.Duration, error)
	// Close releases the store's resources. Later calls return ErrClosed.
	Close() error
}
