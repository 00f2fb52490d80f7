// Package counterstest is the conformance suite of the counters port. Every
// adapter runs it: mem always, redis against the server `make test` starts.
// Each case uses fresh keys, so the suite can share one server with earlier
// runs.
package counterstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
)

// Harness is what an adapter hands the suite for one test.
type Harness struct {
	// Counters is the implementation under test. Its cleanup is registered
	// by the NewFunc; the suite may Close it itself.
	Counters counters.Counters
	// Advance moves the clock that expires counters and bans forward by d:
	// a fake clock's Advance for mem, a real wait for a server whose clock
	// cannot be moved. Take never depends on it (its caller passes now).
	Advance func(d time.Duration)
}

// NewFunc opens Counters for one test and registers their cleanup.
type NewFunc func(t testing.TB) Harness

// TTL is the expiry the suite gives counters and bans. It is short because
// a real server's clock has to actually pass it.
var TTL = 300 * time.Millisecond

// Run runs the conformance suite.
func Run(t *testing.T, newCounters NewFunc) {
	cases := []struct {
		name string
		fn   func(*testing.T, NewFunc)
	}{
		{"IncrFixedWindow", testIncrFixedWindow},
		{"IncrNegativeAndGetMissing", testIncrNegative},
		{"InvalidArguments", testInvalid},
		{"SeparateNamespaces", testNamespaces},
		{"TakeBurstThenRefill", testTakeBurst},
		{"TakeMatchesGCRA", testTakeGCRA},
		{"TakeKeysIndependent", testTakeIndependent},
		{"TakeConcurrentNeverExceeds", testTakeConcurrent},
		{"IncrConcurrentNeverLoses", testIncrConcurrent},
		{"BanExtendsNeverShortens", testBan},
		{"BanExpires", testBanExpires},
		{"Closed", testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newCounters) })
	}
}

var seq atomic.Int64

// Key returns a key no earlier run used.
func Key(t testing.TB, name string) string {
	return fmt.Sprintf("%s/%s/%d-%d", t.Name(), name, time.Now().UnixNano(), seq.Add(1))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func testIncrFixedWindow(t *testing.T, newCounters NewFunc) {
	h := newCounters(t)
	c, ctx := h.Counters, ctx(t)
	k := Key(t, "k")
	for i, want := range []int64{1, 3, 6} {
		got, err := c.Incr(ctx, k, int64(i+1), TTL)
		if err != nil || got != want {
			t.Fatalf("Incr #%d = %d, %v; want %d", i, got, err, want)
		}
	}
	if got, err := c.Get(ctx, k); err != nil || got != 6 {
		t.Fatalf("Get = %d, %v; want 6", got, err)
	}
	// Two thirds into the window another increment must not move the
	// expiry: a third later the counter is gone.
	h.Advance(TTL * 2 / 3)
	if got, err := c.Incr(ctx, k, 1, TTL); err != nil || got != 7 {
		t.Fatalf("Incr late in window = %d, %v; want 7", got, err)
	}
	h.Advance(TTL/3 + 50*time.Millisecond)
	if got, err := c.Get(ctx, k); err != nil || got != 0 {
		t.Fatalf("Get after the window = %d, %v; want 0 (expiry must be fixed at the first increment)", got, err)
	}
	if got, err := c.Incr(ctx, k, 1, TTL); err != nil || got != 1 {
		t.Fatalf("Incr in a new window = %d, %v; want 1", got, err)
	}
}

func testIncrNegative(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	k := Key(t, "k")
	if got, err := c.Get(ctx, k); err != nil || got != 0 {
		t.Fatalf("Get missing = %d, %v; want 0, nil", got, err)
	}
	if got, err := c.Incr(ctx, k, -2, time.Minute); err != nil || got != -2 {
		t.Fatalf("Incr -2 = %d, %v", got, err)
	}
	if got, err := c.Incr(ctx, k, 5, time.Minute); err != nil || got != 3 {
		t.Fatalf("Incr 5 = %d, %v", got, err)
	}
}

func testInvalid(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	now := time.Now()
	for name, err := range map[string]error{
		"Incr empty key": second(c.Incr(ctx, "", 1, time.Second)),
		"Incr zero ttl":  second(c.Incr(ctx, "k", 1, 0)),
		"Get empty key":  second(c.Get(ctx, "")),
		"Take empty key": second(c.Take(ctx, "", 1, time.Second, now)),
		"Take limit 0":   second(c.Take(ctx, "k", 0, time.Second, now)),
		"Take window 0":  second(c.Take(ctx, "k", 1, 0, now)),
		"Ban empty key":  c.Ban(ctx, "", time.Second),
		"Ban zero ttl":   c.Ban(ctx, "k", 0),
		"Banned empty":   second(c.Banned(ctx, "ok", "")),
	} {
		if !errors.Is(err, counters.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func testNamespaces(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	k := Key(t, "shared")
	now := time.Now()
	if _, err := c.Incr(ctx, k, 41, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := c.Take(ctx, k, 1, time.Minute, now)
	if err != nil || !d.Allowed {
		t.Fatalf("Take on a key used by Incr = %+v, %v; want allowed (separate namespace)", d, err)
	}
	if left, err := c.Banned(ctx, k); err != nil || left != 0 {
		t.Fatalf("Banned on a key used by Incr and Take = %v, %v; want 0", left, err)
	}
	if err := c.Ban(ctx, k, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Incr(ctx, k, 1, time.Minute); err != nil || got != 42 {
		t.Fatalf("Incr after Take and Ban = %d, %v; want 42", got, err)
	}
}

func testTakeBurst(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	k := Key(t, "bucket")
	now := time.Now()
	const limit, window = 5, 5 * time.Second
	for i := range limit {
		d, err := c.Take(ctx, k, limit, window, now)
		if err != nil {
			t.Fatal(err)
		}
		want := counters.Decision{Allowed: true, Limit: limit, Remaining: limit - 1 - i, ResetAfter: time.Duration(i+1) * time.Second}
		if i == limit-1 {
			want.RetryAfter = time.Second
		}
		if d != want {
			t.Fatalf("Take #%d = %+v, want %+v", i, d, want)
		}
	}
	d, err := c.Take(ctx, k, limit, window, now)
	want := counters.Decision{Limit: limit, ResetAfter: window, RetryAfter: time.Second}
	if err != nil || d != want {
		t.Fatalf("Take beyond the burst = %+v, %v; want %+v", d, err, want)
	}
	// A denied Take takes nothing: still denied just before the token.
	if d, _ := c.Take(ctx, k, limit, window, now.Add(time.Second-time.Millisecond)); d.Allowed {
		t.Fatalf("Take 1ms before the next token allowed: %+v", d)
	}
	d, err = c.Take(ctx, k, limit, window, now.Add(time.Second))
	want = counters.Decision{Allowed: true, Limit: limit, ResetAfter: window, RetryAfter: time.Second}
	if err != nil || d != want {
		t.Fatalf("Take after one refill interval = %+v, %v; want %+v", d, err, want)
	}
	// Long after, the bucket is full again.
	d, err = c.Take(ctx, k, limit, window, now.Add(time.Hour))
	want = counters.Decision{Allowed: true, Limit: limit, Remaining: limit - 1, ResetAfter: time.Second}
	if err != nil || d != want {
		t.Fatalf("Take after the bucket refilled = %+v, %v; want %+v", d, err, want)
	}
}

// testTakeGCRA drives a bucket with an irregular schedule and compares
// every decision with counters.GCRA run on the side.
func testTakeGCRA(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	k := Key(t, "bucket")
	start := time.Now().Truncate(time.Second)
	const limit, window = 3, 1000 * time.Millisecond // interval 333333µs, remainder 1µs
	var tat int64
	at := start
	steps := []time.Duration{0, 0, 0, 0, 100 * time.Millisecond, 233333 * time.Microsecond, 1, 333333 * time.Microsecond, 0, 2 * time.Second, 0, 0, 0, 0, 999 * time.Millisecond}
	allowed := 0
	for i, step := range steps {
		at = at.Add(step)
		want, next := counters.GCRA(tat, at.UnixMicro(), limit, window.Microseconds())
		if want.Allowed {
			tat = next
			allowed++
		}
		got, err := c.Take(ctx, k, limit, window, at)
		if err != nil || got != want {
			t.Fatalf("step %d (+%v): Take = %+v, %v; want %+v", i, at.Sub(start), got, err, want)
		}
	}
	if allowed == 0 || allowed == len(steps) {
		t.Fatalf("schedule exercised no denial or no admission (%d of %d allowed)", allowed, len(steps))
	}
}

func testTakeIndependent(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	a, b := Key(t, "a"), Key(t, "b")
	now := time.Now()
	if d, _ := c.Take(ctx, a, 1, time.Minute, now); !d.Allowed {
		t.Fatal("first Take on a denied")
	}
	if d, _ := c.Take(ctx, a, 1, time.Minute, now); d.Allowed {
		t.Fatal("second Take on a full bucket allowed")
	}
	if d, err := c.Take(ctx, b, 1, time.Minute, now); err != nil || !d.Allowed {
		t.Fatalf("Take on b after a emptied = %+v, %v; want allowed", d, err)
	}
}

func testTakeConcurrent(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	k := Key(t, "hot")
	const limit, workers, each = 100, 16, 25
	now := time.Now()
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				d, err := c.Take(ctx, k, limit, time.Hour, now)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != limit || denied.Load() != workers*each-limit {
		t.Fatalf("%d goroutines × %d Takes on a bucket of %d: allowed %d, denied %d; want exactly %d allowed",
			workers, each, limit, allowed.Load(), denied.Load(), limit)
	}
}

func testIncrConcurrent(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	k := Key(t, "n")
	const workers, each = 16, 50
	var wg sync.WaitGroup
	seen := make([]atomic.Bool, workers*each+1)
	for range workers {
		wg.Go(func() {
			for range each {
				v, err := c.Incr(ctx, k, 1, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if v < 1 || v > workers*each || seen[v].Swap(true) {
					t.Errorf("Incr returned %d twice or out of range", v)
				}
			}
		})
	}
	wg.Wait()
	if got, err := c.Get(ctx, k); err != nil || got != workers*each {
		t.Fatalf("after %d concurrent Incr: Get = %d, %v", workers*each, got, err)
	}
}

func testBan(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	a, b := Key(t, "a"), Key(t, "b")
	if left, err := c.Banned(ctx, a, b); err != nil || left != 0 {
		t.Fatalf("Banned before any ban = %v, %v", left, err)
	}
	if left, err := c.Banned(ctx); err != nil || left != 0 {
		t.Fatalf("Banned with no keys = %v, %v", left, err)
	}
	if err := c.Ban(ctx, a, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Ban(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Banned(ctx, a); err != nil || left <= 59*time.Minute || left > time.Hour {
		t.Fatalf("Banned after a 1h then a 1m ban = %v, %v; want about 1h (a shorter ban never shortens)", left, err)
	}
	if err := c.Ban(ctx, b, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Ban(ctx, b, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Banned(ctx, b); err != nil || left <= 119*time.Second || left > 2*time.Minute {
		t.Fatalf("Banned after a 1m then a 2m ban = %v, %v; want about 2m (a longer ban extends)", left, err)
	}
	if left, err := c.Banned(ctx, Key(t, "none"), b, a); err != nil || left <= 59*time.Minute {
		t.Fatalf("Banned(none, b, a) = %v, %v; want the longest, about 1h", left, err)
	}
}

func testBanExpires(t *testing.T, newCounters NewFunc) {
	h := newCounters(t)
	c, ctx := h.Counters, ctx(t)
	k := Key(t, "k")
	if err := c.Ban(ctx, k, TTL); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Banned(ctx, k); err != nil || left <= 0 || left > TTL {
		t.Fatalf("Banned right after Ban(%v) = %v, %v", TTL, left, err)
	}
	h.Advance(TTL + 50*time.Millisecond)
	if left, err := c.Banned(ctx, k); err != nil || left != 0 {
		t.Fatalf("Banned after the ban ran out = %v, %v; want 0", left, err)
	}
}

func testClosed(t *testing.T, newCounters NewFunc) {
	c, ctx := newCounters(t).Counters, ctx(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for name, err := range map[string]error{
		"Incr":   second(c.Incr(ctx, "k", 1, time.Second)),
		"Get":    second(c.Get(ctx, "k")),
		"Take":   second(c.Take(ctx, "k", 1, time.Second, now)),
		"Ban":    c.Ban(ctx, "k", time.Second),
		"Banned": second(c.Banned(ctx, "k")),
	} {
		if !errors.Is(err, counters.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", name, err)
		}
	}
}
