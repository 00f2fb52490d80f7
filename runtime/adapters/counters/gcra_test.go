package counters_test

import (
	"math/rand/v2"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/counters"
)

// TestGCRANeverExceeds drives buckets of random shapes with random request
// times and checks GCRA's bound: in any span of t microseconds a bucket
// admits at most 1 + (t + window - interval)/interval requests (about
// limit + t/interval; the interval is whole microseconds), and a full
// bucket admits exactly limit at once.
func TestGCRANeverExceeds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		limit := 1 + rng.IntN(50)
		window := int64(1000 + rng.IntN(10_000_000))
		interval := max(window/int64(limit), 1)
		var tat, now int64 = 0, 1_700_000_000_000_000
		start := now
		var times []int64
		for range 2000 {
			now += rng.Int64N(2 * interval / int64(1+rng.IntN(limit)))
			d, next := counters.GCRA(tat, now, limit, window)
			if d.Allowed {
				tat = next
				times = append(times, now)
			}
			if d.Remaining < 0 || d.Remaining >= limit || (!d.Allowed && d.RetryAfter <= 0) {
				t.Fatalf("limit %d window %dµs: bad decision %+v", limit, window, d)
			}
		}
		for i := range times {
			for j := i; j < len(times); j++ {
				span := times[j] - times[i]
				if int64(j-i+1) > 1+(span+window-interval)/interval {
					t.Fatalf("limit %d window %dµs: %d admitted within %dµs (start %d)", limit, window, j-i+1, span, times[i]-start)
				}
				if span > window {
					break
				}
			}
		}
	}
	var tat int64
	for i := range 10 {
		d, next := counters.GCRA(tat, 5_000_000, 10, 1_000_000)
		if !d.Allowed || d.Remaining != 9-i {
			t.Fatalf("burst request %d: %+v", i, d)
		}
		tat = next
	}
	if d, _ := counters.GCRA(tat, 5_000_000, 10, 1_000_000); d.Allowed {
		t.Fatal("11th request of a burst of 10 allowed")
	}
}
