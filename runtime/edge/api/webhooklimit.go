package api

import (
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Webhook executions are limited as Discord limits them: 5 per 2 s per
// webhook, and 30 per minute per channel for all of its webhooks
// together — whoever calls, from wherever. The counters live in the
// process that owns the webhook's guild (the split wiring routes every
// request of a guild's webhooks to that node), so the limit holds across
// api nodes; they are in memory, so a guild that moves to another node
// starts with fresh windows (at most one extra burst).
//
// Every execution's answer carries the X-RateLimit-* headers of the
// webhook's bucket (they replace the per-caller ones the REST middleware
// set, which cannot know about other callers); a refusal is Discord's 429
// — JSON body with retry_after, Retry-After, Via and X-RateLimit-Scope:
// "user" for the webhook's own bucket, "shared" for the channel's (a
// shared-resource limit does not count towards the caller's invalid
// requests).
const (
	webhookBurst         = 5
	webhookWindow        = 2 * time.Second
	webhookChannelBurst  = 30
	webhookChannelWindow = time.Minute
	// maxLimitedWebhooks bounds the limiter's memory; it forgets every
	// window when full (a burst above the limit is the worst outcome).
	maxLimitedWebhooks = 1 << 16
)

// Bucket names of the two limits, as X-RateLimit-Bucket writes them. The
// webhook's is the REST middleware's name for the route ("METHOD
// template", FNV-1a 64 in hex), so a client sees one bucket whichever
// layer answered.
var (
	webhookBucket        = bucketHash("POST /webhooks/{webhook_id}/{webhook_token}")
	webhookChannelBucket = bucketHash("webhook executions per channel")
)

func bucketHash(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return strconv.FormatUint(h.Sum64(), 16)
}

// webhookLimiter holds fixed windows per webhook and per channel.
type webhookLimiter struct {
	mu       sync.Mutex
	hooks    map[snowflake.ID]*limitWindow
	channels map[snowflake.ID]*limitWindow
}

type limitWindow struct {
	start time.Time
	n     int
}

// webhookQuota is a bucket's state after an execution was counted, or the
// bucket that refused it.
type webhookQuota struct {
	limit, remaining int
	resetAfter       time.Duration
	bucket           string
	// refused: retry after resetAfter; shared: the channel's bucket.
	refused, shared bool
}

// window returns id's current window in m, opening a new one when the
// last has run out.
func window(m *map[snowflake.ID]*limitWindow, id snowflake.ID, now time.Time, length time.Duration) *limitWindow {
	if *m == nil || len(*m) >= maxLimitedWebhooks {
		*m = make(map[snowflake.ID]*limitWindow)
	}
	w := (*m)[id]
	if w == nil || now.Sub(w.start) >= length {
		w = &limitWindow{start: now}
		(*m)[id] = w
	}
	return w
}

// take counts one execution of webhook hook into channel at now, unless
// either bucket is spent (then nothing is counted).
func (l *webhookLimiter) take(hook, channel snowflake.ID, now time.Time) webhookQuota {
	l.mu.Lock()
	defer l.mu.Unlock()
	hw := window(&l.hooks, hook, now, webhookWindow)
	cw := window(&l.channels, channel, now, webhookChannelWindow)
	hookReset := webhookWindow - now.Sub(hw.start)
	switch {
	case hw.n >= webhookBurst:
		return webhookQuota{limit: webhookBurst, resetAfter: hookReset, bucket: webhookBucket, refused: true}
	case cw.n >= webhookChannelBurst:
		return webhookQuota{limit: webhookChannelBurst, resetAfter: webhookChannelWindow - now.Sub(cw.start),
			bucket: webhookChannelBucket, refused: true, shared: true}
	}
	hw.n++
	cw.n++
	return webhookQuota{limit: webhookBurst, remaining: webhookBurst - hw.n, resetAfter: hookReset, bucket: webhookBucket}
}

// write sets the bucket's X-RateLimit-* headers and, for a refusal,
// answers the 429; it reports whether the execution may go on.
func (q webhookQuota) write(w http.ResponseWriter, now time.Time) bool {
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(q.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(now.Add(q.resetAfter).UnixMilli())/1000, 'f', 3, 64))
	h.Set("X-RateLimit-Reset-After", seconds(q.resetAfter))
	h.Set("X-RateLimit-Bucket", q.bucket)
	if !q.refused {
		return true
	}
	scope := "user"
	if q.shared {
		scope = "shared"
	}
	h.Set("X-RateLimit-Scope", scope)
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(q.resetAfter.Seconds())), 10))
	h.Set("Via", "1.1 concord")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(`{"message":"You are being rate limited.","retry_after":` + seconds(q.resetAfter) + `,"global":false}`))
	return false
}

// seconds writes d as fractional seconds, rounded up to the millisecond
// so that a client never retries early.
func seconds(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}
