package ratelimit_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters/counterstest"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

// newCountersFunc opens the counters a suite run limits with. Its
// harness's Advance must move clock too: the limiter reads clock, the
// counters expire tallies and bans on theirs.
type newCountersFunc func(t testing.TB, clock *counterstest.Clock) counterstest.Harness

// runSuite runs the middleware's behaviour tests over one counters
// implementation: mem always (ratelimit_test.go), redis under the
// integration tag.
func runSuite(t *testing.T, newCounters newCountersFunc) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, newCountersFunc)
	}{
		{"HeadersOnEveryResponse", testHeadersOnEveryResponse},
		{"RouteLimit429", testRouteLimit429},
		{"BucketsSplitByMajor", testBucketsSplitByMajor},
		{"SharedBucket", testSharedBucket},
		{"GlobalLimit", testGlobalLimit},
		{"GlobalUserAccounts", testGlobalUser},
		{"InteractionRoutesExempt", testInteractionExempt},
		{"BanEscalation", testBanEscalation},
		{"SharedScopeNotCounted", testSharedScopeNotCounted},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newCounters) })
	}
}

var runs atomic.Int64

// env is one limiter in front of a handler that answers env.status.
type env struct {
	t       *testing.T
	clock   *counterstest.Clock
	advance func(time.Duration)
	lim     *ratelimit.Limiter
	h       http.Handler
	reg     *prometheus.Registry
	status  atomic.Int32
	header  http.Header // extra headers the handler writes
	calls   atomic.Int64
	uniq    string
	// banStart is when the request that causes a ban was sent (zero
	// until then); see check429.
	banStart time.Time
}

func newEnv(t *testing.T, newCounters newCountersFunc, configure func(*ratelimit.Config)) *env {
	e := &env{t: t, clock: counterstest.NewClock(time.Now().Truncate(time.Second)), reg: prometheus.NewRegistry(), header: http.Header{}}
	e.uniq = fmt.Sprintf("%d-%d", time.Now().UnixNano(), runs.Add(1))
	e.status.Store(http.StatusOK)
	hs := newCounters(t, e.clock)
	e.advance = hs.Advance
	cfg := ratelimit.Config{Counters: hs.Counters, Now: e.clock.Now, Registerer: e.reg, Logger: slog.New(slog.DiscardHandler)}
	if configure != nil {
		configure(&cfg)
	}
	lim, err := ratelimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.lim = lim
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		for k, v := range e.header {
			w.Header()[k] = v
		}
		w.WriteHeader(int(e.status.Load()))
	})
	e.h = lim.Middleware(next, e.identify)
	return e
}

// identify reads test tokens: "bot-<id>" is a bot, "user-<id>" a user,
// anything else is not authenticated.
func (e *env) identify(r *http.Request) (ratelimit.Principal, bool) {
	tok := ratelimit.BearerToken(r)
	if id, ok := strings.CutPrefix(tok, "bot-"); ok {
		return ratelimit.Principal{ID: id, Bot: true}, true
	}
	if id, ok := strings.CutPrefix(tok, "user-"); ok {
		return ratelimit.Principal{ID: id}, true
	}
	return ratelimit.Principal{}, false
}

// token and addr name a principal and an address no other run used.
func (e *env) token(kind, name string) string { return kind + "-" + name + "-" + e.uniq }
func (e *env) addr(name string) string        { return "addr-" + name + "-" + e.uniq }

func (e *env) do(method, path, token, addr string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bot "+token)
	}
	r.RemoteAddr = addr + ":40000"
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// checkHeaders asserts the X-RateLimit-* headers every response carries.
func (e *env) checkHeaders(w *httptest.ResponseRecorder, limit, remaining int, resetAfter time.Duration) {
	e.t.Helper()
	h := w.Header()
	want := map[string]string{
		"X-RateLimit-Limit":       strconv.Itoa(limit),
		"X-RateLimit-Remaining":   strconv.Itoa(remaining),
		"X-RateLimit-Reset-After": strconv.FormatFloat(resetAfter.Seconds(), 'f', 3, 64),
		"X-RateLimit-Reset":       strconv.FormatFloat(float64(e.clock.Now().Add(resetAfter).UnixMilli())/1000, 'f', 3, 64),
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			e.t.Errorf("status %d: %s = %q, want %q", w.Code, k, got, v)
		}
	}
	if b := h.Get("X-RateLimit-Bucket"); b == "" {
		e.t.Errorf("status %d: no X-RateLimit-Bucket", w.Code)
	}
}

// body429 is the JSON a 429 carries.
type body429 struct {
	Message    string   `json:"message"`
	RetryAfter *float64 `json:"retry_after"`
	Global     *bool    `json:"global"`
}

// check429 asserts the shape of a 429 and returns its body.
func (e *env) check429(w *httptest.ResponseRecorder, scope ratelimit.Scope, global bool, retryAfter time.Duration) {
	e.t.Helper()
	if w.Code != http.StatusTooManyRequests {
		e.t.Fatalf("status %d, want 429", w.Code)
	}
	h := w.Header()
	want := map[string]string{
		"Content-Type":      "application/json",
		"Via":               "1.1 concord",
		"Retry-After":       strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))),
		"X-RateLimit-Scope": string(scope),
	}
	if global {
		want["X-RateLimit-Global"] = "true"
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			e.t.Errorf("429 %s = %q, want %q", k, got, v)
		}
	}
	if !global && h.Get("X-RateLimit-Global") != "" {
		e.t.Errorf("route 429 carries X-RateLimit-Global %q", h.Get("X-RateLimit-Global"))
	}
	var b body429
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		e.t.Fatalf("429 body %q: %v", w.Body, err)
	}
	if b.Message != "You are being rate limited." || b.RetryAfter == nil || b.Global == nil {
		e.t.Fatalf("429 body %s lacks message, retry_after or global", w.Body)
	}
	// A ban's time left is the store's own TTL, which runs on the wall
	// clock: it may have shrunk by the real time since the ban began.
	lo := retryAfter.Seconds() - 0.0011
	if !e.banStart.IsZero() {
		lo -= time.Since(e.banStart).Seconds()
	}
	if got := *b.RetryAfter; got < lo || got > retryAfter.Seconds()+0.0011 || *b.Global != global {
		e.t.Errorf("429 body retry_after %v global %v, want %v %v", got, *b.Global, retryAfter.Seconds(), global)
	}
}

func (e *env) metric(result string) float64 {
	return metricValue(e.t, e.reg, "concord_ratelimit_requests_total", "result", result)
}

func testHeadersOnEveryResponse(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, nil)
	bot, addr := e.token("bot", "a"), e.addr("a")
	// Send message: 5 per 5s, one token per second. Every status the
	// handler writes gets the headers.
	for i, status := range []int{http.StatusOK, http.StatusNotFound, http.StatusForbidden, http.StatusInternalServerError, http.StatusNoContent} {
		e.status.Store(int32(status))
		w := e.do("POST", "/api/v10/channels/111111111111111111/messages", bot, addr)
		if w.Code != status {
			t.Fatalf("request %d: status %d, want the handler's %d", i, w.Code, status)
		}
		e.checkHeaders(w, 5, 4-i, time.Duration(i+1)*time.Second)
	}
	// Unauthenticated requests and routes outside the table have them
	// too (the default limit, 50 per second).
	e.status.Store(http.StatusUnauthorized)
	w := e.do("GET", "/api/v9/users/@me", "", addr)
	e.checkHeaders(w, 50, 49, 20*time.Millisecond)
	if e.calls.Load() != 6 {
		t.Fatalf("handler ran %d times, want 6", e.calls.Load())
	}
}

func testRouteLimit429(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, nil)
	bot, addr := e.token("bot", "a"), e.addr("a")
	path := "/api/v10/channels/111111111111111111/messages"
	for range 5 {
		if w := e.do("POST", path, bot, addr); w.Code != http.StatusOK {
			t.Fatalf("status %d within the limit", w.Code)
		}
	}
	w := e.do("POST", path, bot, addr)
	e.check429(w, ratelimit.ScopeUser, false, time.Second)
	e.checkHeaders(w, 5, 0, 5*time.Second)
	if e.calls.Load() != 5 {
		t.Fatalf("handler ran %d times; a refused request must not reach it", e.calls.Load())
	}
	// The Retry-After is exact: a second later one more goes through.
	e.clock.Advance(time.Second)
	if w := e.do("POST", path, bot, addr); w.Code != http.StatusOK {
		t.Fatalf("after Retry-After: status %d, want 200", w.Code)
	}
	if got := e.metric("route_limited"); got != 1 {
		t.Fatalf("route_limited metric = %v, want 1", got)
	}
}

func testBucketsSplitByMajor(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, nil)
	bot, other, addr := e.token("bot", "a"), e.token("bot", "b"), e.addr("a")
	a := "/api/v10/channels/111111111111111111/messages"
	b := "/api/v10/channels/222222222222222222/messages"
	for range 5 {
		e.do("POST", a, bot, addr)
	}
	wa := e.do("POST", a, bot, addr)
	if wa.Code != http.StatusTooManyRequests {
		t.Fatalf("channel A after 5 sends: %d, want 429", wa.Code)
	}
	wb := e.do("POST", b, bot, addr)
	if wb.Code != http.StatusOK {
		t.Fatalf("channel B while A is limited: %d, want 200 (major parameter splits buckets)", wb.Code)
	}
	e.checkHeaders(wb, 5, 4, time.Second)
	if ha, hb := wa.Header().Get("X-RateLimit-Bucket"), wb.Header().Get("X-RateLimit-Bucket"); ha != hb {
		t.Fatalf("bucket hash differs by channel (%q, %q): it must name the route only", ha, hb)
	}
	if w := e.do("POST", a, other, addr); w.Code != http.StatusOK {
		t.Fatalf("another bot in channel A: %d, want 200 (buckets are per principal)", w.Code)
	}
	// Another route on the same channel has its own bucket and hash.
	w := e.do("GET", a, bot, addr)
	if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Bucket") == wa.Header().Get("X-RateLimit-Bucket") {
		t.Fatalf("GET messages: %d, bucket %q; want 200 and a bucket of its own", w.Code, w.Header().Get("X-RateLimit-Bucket"))
	}
	// Guild routes split by guild, webhooks by id and token.
	g1, g2 := "/api/v10/guilds/333333333333333333/channels", "/api/v10/guilds/444444444444444444/channels"
	for range 5 {
		e.do("POST", g1, bot, addr)
	}
	if w := e.do("POST", g1, bot, addr); w.Code != http.StatusTooManyRequests {
		t.Fatalf("guild 1 after 5 creates: %d, want 429", w.Code)
	}
	if w := e.do("POST", g2, bot, addr); w.Code != http.StatusOK {
		t.Fatalf("guild 2 while guild 1 is limited: %d", w.Code)
	}
	w1, w2 := "/api/webhooks/555555555555555555/tokenA", "/api/webhooks/555555555555555555/tokenB"
	for range 5 {
		e.do("POST", w1, "", addr)
	}
	if w := e.do("POST", w1, "", addr); w.Code != http.StatusTooManyRequests {
		t.Fatalf("webhook token A after 5 posts: %d, want 429", w.Code)
	}
	if w := e.do("POST", w2, "", addr); w.Code != http.StatusOK {
		t.Fatalf("same webhook id, token B: %d, want 200 (major is webhook_id+token)", w.Code)
	}
}

func testSharedBucket(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, nil)
	bot, addr := e.token("bot", "a"), e.addr("a")
	// Adding and removing one's own reaction share the "reactions" bucket.
	put := "/api/v10/channels/111111111111111111/messages/222222222222222222/reactions/%F0%9F%91%8D/@me"
	w := e.do("PUT", put, bot, addr)
	if w.Code != http.StatusOK {
		t.Fatalf("PUT reaction: %d", w.Code)
	}
	w2 := e.do("DELETE", strings.Replace(put, "%F0%9F%91%8D", "%E2%9D%A4", 1), bot, addr)
	e.check429(w2, ratelimit.ScopeUser, false, 250*time.Millisecond)
	if w.Header().Get("X-RateLimit-Bucket") != w2.Header().Get("X-RateLimit-Bucket") {
		t.Fatal("PUT and DELETE of a reaction report different buckets")
	}
}

func testGlobalLimit(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, func(c *ratelimit.Config) { c.GlobalBot = 3 })
	bot, addr := e.token("bot", "a"), e.addr("a")
	// Different channels, so no route bucket binds: only the global does.
	for i := range 3 {
		if w := e.do("GET", fmt.Sprintf("/api/v10/channels/%d/messages", 1000+i), bot, addr); w.Code != http.StatusOK {
			t.Fatalf("request %d under the global limit: %d", i, w.Code)
		}
	}
	w := e.do("GET", "/api/v10/channels/2000/messages", bot, addr)
	e.check429(w, ratelimit.ScopeGlobal, true, time.Second/3)
	e.checkHeaders(w, 50, 49, 20*time.Millisecond) // the route bucket's own state
	if got := e.metric("global_limited"); got != 1 {
		t.Fatalf("global_limited metric = %v, want 1", got)
	}
	// Another bot is unaffected.
	if w := e.do("GET", "/api/v10/channels/2000/messages", e.token("bot", "b"), addr); w.Code != http.StatusOK {
		t.Fatalf("another bot: %d", w.Code)
	}
	e.clock.Advance(time.Second / 3)
	if w := e.do("GET", "/api/v10/channels/3000/messages", bot, addr); w.Code != http.StatusOK {
		t.Fatalf("after retry_after: %d", w.Code)
	}
}

func testGlobalUser(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, func(c *ratelimit.Config) { c.GlobalBot, c.GlobalUser = 5, 2 })
	user, bot, addr := e.token("user", "u"), e.token("bot", "b"), e.addr("a")
	for i := range 2 {
		if w := e.do("GET", fmt.Sprintf("/api/v10/channels/%d/messages", 1000+i), user, addr); w.Code != http.StatusOK {
			t.Fatalf("user request %d: %d", i, w.Code)
		}
	}
	e.check429(e.do("GET", "/api/v10/channels/1999/messages", user, addr), ratelimit.ScopeGlobal, true, time.Second/2)
	for i := range 5 {
		if w := e.do("GET", fmt.Sprintf("/api/v10/channels/%d/messages", 1000+i), bot, addr); w.Code != http.StatusOK {
			t.Fatalf("bot request %d: %d (bots have their own global)", i, w.Code)
		}
	}
}

func testInteractionExempt(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, func(c *ratelimit.Config) { c.GlobalBot = 2 })
	bot, addr := e.token("bot", "a"), e.addr("a")
	for i := range 10 {
		cb := fmt.Sprintf("/api/v10/interactions/%d/tok%d/callback?with_response=true", 900000+i, i)
		if w := e.do("POST", cb, bot, addr); w.Code != http.StatusOK {
			t.Fatalf("interaction callback %d: %d (exempt from the global limit)", i, w.Code)
		}
		fu := fmt.Sprintf("/api/v10/webhooks/777/tok%d/messages/@original", i)
		if w := e.do("PATCH", fu, bot, addr); w.Code != http.StatusOK {
			t.Fatalf("followup edit %d: %d (exempt from the global limit)", i, w.Code)
		}
	}
	// The global limit still holds elsewhere: the callbacks did not use it.
	for i := range 2 {
		if w := e.do("GET", fmt.Sprintf("/api/v10/channels/%d/messages", i+1), bot, addr); w.Code != http.StatusOK {
			t.Fatalf("normal route %d: %d", i, w.Code)
		}
	}
	if w := e.do("GET", "/api/v10/channels/99/messages", bot, addr); w.Code != http.StatusTooManyRequests {
		t.Fatalf("third normal route: %d, want 429", w.Code)
	}
}

func testBanEscalation(t *testing.T, newCounters newCountersFunc) {
	ban := counterstest.TTL
	e := newEnv(t, newCounters, func(c *ratelimit.Config) {
		c.InvalidLimit, c.InvalidWindow, c.BanDuration = 3, time.Minute, ban
	})
	bad, addr := e.token("bot", "bad"), e.addr("a")
	e.status.Store(http.StatusUnauthorized)
	for i := range 3 {
		if i == 2 {
			e.banStart = time.Now()
		}
		if w := e.do("GET", fmt.Sprintf("/api/v10/channels/%d", i+1), bad, addr); w.Code != http.StatusUnauthorized {
			t.Fatalf("invalid request %d: %d, want the handler's 401", i, w.Code)
		}
	}
	calls := e.calls.Load()
	e.status.Store(http.StatusOK)
	w := e.do("GET", "/api/v10/channels/9", bad, addr)
	e.check429(w, ratelimit.ScopeGlobal, true, ban)
	// The address is banned too (a clean token from it is refused), and
	// the token is banned from any address.
	e.check429(e.do("GET", "/api/v10/channels/9", e.token("bot", "clean"), addr), ratelimit.ScopeGlobal, true, ban)
	e.check429(e.do("GET", "/api/v10/channels/9", bad, e.addr("elsewhere")), ratelimit.ScopeGlobal, true, ban)
	if ok := e.do("GET", "/api/v10/channels/9", e.token("bot", "clean"), e.addr("elsewhere")); ok.Code != http.StatusOK {
		t.Fatalf("clean token from a clean address: %d", ok.Code)
	}
	if e.calls.Load() != calls+1 {
		t.Fatalf("banned requests reached the handler (%d calls, want %d)", e.calls.Load(), calls+1)
	}
	if got := e.metric("banned"); got != 3 {
		t.Fatalf("banned metric = %v, want 3", got)
	}
	if got := metricValue(t, e.reg, "concord_ratelimit_bans_total", "kind", "token"); got != 1 {
		t.Fatalf("token bans = %v, want 1", got)
	}
	// The ban runs out; the 429s it caused were not counted, so it does
	// not come straight back.
	e.advance(ban + 50*time.Millisecond)
	if w := e.do("GET", "/api/v10/channels/9", bad, addr); w.Code != http.StatusOK {
		t.Fatalf("after the ban: %d, want 200", w.Code)
	}
}

func testSharedScopeNotCounted(t *testing.T, newCounters newCountersFunc) {
	e := newEnv(t, newCounters, func(c *ratelimit.Config) { c.InvalidLimit = 2 })
	bot, addr := e.token("bot", "a"), e.addr("a")
	e.status.Store(http.StatusTooManyRequests)
	e.header.Set("X-RateLimit-Scope", "shared")
	for i := range 5 {
		if w := e.do("GET", fmt.Sprintf("/api/v10/channels/%d", i+1), bot, addr); w.Code != http.StatusTooManyRequests || w.Header().Get("Via") != "" {
			t.Fatalf("request %d: %d; want the handler's own shared 429", i, w.Code)
		}
	}
	e.header.Del("X-RateLimit-Scope")
	e.status.Store(http.StatusOK)
	if w := e.do("GET", "/api/v10/channels/9", bot, addr); w.Code != http.StatusOK {
		t.Fatalf("after 5 shared-scope 429s: %d; they must not count towards a ban", w.Code)
	}
	e.status.Store(http.StatusForbidden)
	e.do("GET", "/api/v10/channels/9", bot, addr)
	e.do("GET", "/api/v10/channels/9", bot, addr)
	e.status.Store(http.StatusOK)
	if w := e.do("GET", "/api/v10/channels/9", bot, addr); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after 2 403s with InvalidLimit 2: %d, want a ban", w.Code)
	}
}

// metricValue reads one labelled counter from reg, zero if it is absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
