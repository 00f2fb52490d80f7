package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Identify admission limits of bots shared by `concord dev` and the
// gateway nodes of `concord serve` (both built by runtime/app).
const (
	// BotIdentifyWindow is the window of max_concurrency identifies per
	// bucket (shard_id % max_concurrency).
	BotIdentifyWindow = 5 * time.Second
	// BotIdentifiesPerDay is session_start_limit.total.
	BotIdentifiesPerDay = 1000
	// BotIdentifyDay is the daily window.
	BotIdentifyDay = 24 * time.Hour
)

// BotIdentifyDayKey is the counters key of a bot's daily identify count;
// GET /gateway/bot reads it for session_start_limit.remaining.
func BotIdentifyDayKey(botID snowflake.ID) string { return "identify-day:" + botID.String() }

// BotAdmission counts bot identifies in a counters backend: at most
// Concurrency per BotIdentifyWindow in each bucket shard_id %
// Concurrency, and BotIdentifiesPerDay per bot per BotIdentifyDay. With a
// Redis backend every gateway node sharing it counts against the same
// buckets. A counters outage admits (rate limiting fails open: losing Redis
// must not lock every bot out).
type BotAdmission struct {
	// Counters holds the buckets and daily counts.
	Counters counters.Counters
	// Concurrency is max_concurrency (≥ 1; 0 reads as 1).
	Concurrency int
	// Now is the clock of the buckets. Default time.Now.
	Now func() time.Time
	// Logger receives the fail-open warnings. Default slog.Default().
	Logger *slog.Logger
}

// Admit takes one identify from the bot's concurrency bucket and daily
// count. Over a limit it returns an error wrapping ErrIdentifyRateLimited
// (the node answers op 9 d:false).
func (a BotAdmission) Admit(ctx context.Context, botID snowflake.ID, shard int) error {
	conc := max(a.Concurrency, 1)
	now, log := time.Now, slog.Default()
	if a.Now != nil {
		now = a.Now
	}
	if a.Logger != nil {
		log = a.Logger
	}
	bot := botID.String()
	bucket := shard % conc
	key := "identify:" + bot + ":" + strconv.Itoa(bucket)
	d, err := a.Counters.Take(ctx, key, conc, BotIdentifyWindow, now())
	if err != nil {
		log.Warn("identify admission unavailable, admitting", "bot_id", bot, "err", err)
		return nil
	}
	if !d.Allowed {
		return fmt.Errorf("identify: bot %s shard bucket %d full, retry in %s: %w", bot, bucket, d.RetryAfter, ErrIdentifyRateLimited)
	}
	n, err := a.Counters.Incr(ctx, BotIdentifyDayKey(botID), 1, BotIdentifyDay)
	if err != nil {
		log.Warn("identify admission unavailable, admitting", "bot_id", bot, "err", err)
		return nil
	}
	if n > BotIdentifiesPerDay {
		return fmt.Errorf("identify: bot %s used %d identifies today: %w", bot, n, ErrIdentifyRateLimited)
	}
	return nil
}

// NodeThrottle is a node-wide token bucket in front of IDENTIFY: Rate
// identifies per second with bursts of Burst. It smears a reconnect storm
// (every session of a dead node identifying on the survivors at once) so
// that the store lookups identify makes stay within what the store
// answers quickly. It is safe for concurrent use; the zero value
// is not: build it with NewNodeThrottle.
type NodeThrottle struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewNodeThrottle returns a throttle admitting rate identifies per second
// with bursts of burst (burst ≤ 0 reads as max(1, rate)), starting full.
// A rate ≤ 0 returns nil: no throttle (Allow on a nil throttle admits).
func NewNodeThrottle(rate float64, burst int, now func() time.Time) *NodeThrottle {
	if rate <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	b := float64(burst)
	if burst <= 0 {
		b = max(1, rate)
	}
	return &NodeThrottle{rate: rate, burst: b, now: now, tokens: b, last: now()}
}

// Allow takes one token. When the bucket is empty it takes nothing and
// returns how long until the next token.
func (t *NodeThrottle) Allow() (ok bool, retryAfter time.Duration) {
	if t == nil {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if el := now.Sub(t.last).Seconds(); el > 0 {
		t.tokens = min(t.burst, t.tokens+el*t.rate)
	}
	t.last = now
	if t.tokens >= 1 {
		t.tokens--
		return true, 0
	}
	return false, time.Duration((1 - t.tokens) / t.rate * float64(time.Second))
}
