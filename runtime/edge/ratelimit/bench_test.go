package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

// discard is a ResponseWriter that keeps nothing but its header map, so
// the benchmark measures the middleware, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkMiddleware measures what the limiter adds to a request, with mem
// counters, against the bare handler in the same run:
//
//   - Bare: the handler alone.
//   - Allowed: 1,024 bots sending messages to their own channels, limits
//     raised so every request passes (ban check, route and global Take,
//     five headers, status capture).
//   - Refused: one bot over its route limit: the 429 path (headers, JSON
//     body, the invalid-request tally).
func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"id":"1"}`))
	})
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("POST", fmt.Sprintf("/api/v10/channels/%d/messages", 1_000_000_000_000_000+i), nil)
		reqs[i].Header.Set("Authorization", fmt.Sprintf("Bot token-%d", i))
	}
	identify := func(r *http.Request) (ratelimit.Principal, bool) {
		return ratelimit.Principal{ID: ratelimit.BearerToken(r), Bot: true}, true
	}
	run := func(b *testing.B, h http.Handler, reqs []*http.Request) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := &discard{h: make(http.Header, 16)}
			i := 0
			for pb.Next() {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
				i++
			}
		})
	}
	newLimiter := func(b *testing.B, cfg ratelimit.Config) *ratelimit.Limiter {
		c, err := mem.New(mem.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		cfg.Counters = c
		l, err := ratelimit.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	b.Run("Bare", func(b *testing.B) { run(b, ok, reqs) })
	b.Run("Allowed", func(b *testing.B) {
		huge := ratelimit.Limit{Requests: 1 << 30, Window: time.Second}
		l := newLimiter(b, ratelimit.Config{
			Routes:    map[string]ratelimit.Limit{"POST /channels/{channel_id}/messages": huge},
			GlobalBot: 1 << 30,
		})
		run(b, l.Middleware(ok, identify), reqs)
	})
	b.Run("Refused", func(b *testing.B) {
		l := newLimiter(b, ratelimit.Config{InvalidLimit: 1 << 30})
		run(b, l.Middleware(ok, identify), reqs[:1])
	})
}
