//go:build integration

package ratelimit_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters/counterstest"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis"
)

// TestMiddlewareRedis runs the middleware suite over Redis counters, as
// production runs it. It fails, never skips, when CONCORD_TEST_REDIS is unset.
func TestMiddlewareRedis(t *testing.T) {
	runSuite(t, func(t testing.TB, clock *counterstest.Clock) counterstest.Harness {
		addr := os.Getenv("CONCORD_TEST_REDIS")
		if addr == "" {
			t.Fatal("CONCORD_TEST_REDIS is not set: run `make test`, or start a server with `hack/redis/start.sh` and set CONCORD_TEST_REDIS=127.0.0.1:6390")
		}
		c, err := redis.New(context.Background(), redis.Config{Addr: addr, Prefix: "concord-test:", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("redis.New: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		// Buckets follow the limiter's clock; tallies and bans expire on
		// Redis's, so both must move.
		return counterstest.Harness{Counters: c, Advance: func(d time.Duration) {
			clock.Advance(d)
			time.Sleep(d)
		}}
	})
}
