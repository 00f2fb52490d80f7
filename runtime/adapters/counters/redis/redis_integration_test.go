//go:build integration

package redis_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters/counterstest"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis"
)

// addr returns the server `make test` started. It fails, never skips, when
// CONCORD_TEST_REDIS is unset.
func addr(t testing.TB) string {
	a := os.Getenv("CONCORD_TEST_REDIS")
	if a == "" {
		t.Fatal("CONCORD_TEST_REDIS is not set: run `make test`, or start a server with `hack/redis/start.sh` and set CONCORD_TEST_REDIS=127.0.0.1:6390")
	}
	return a
}

func newCounters(t testing.TB) counterstest.Harness {
	c, err := redis.New(context.Background(), redis.Config{Addr: addr(t), Prefix: "concord-test:", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	// Redis expires keys on its own clock: let real time pass.
	return counterstest.Harness{Counters: c, Advance: time.Sleep}
}

func TestConformance(t *testing.T) {
	counterstest.Run(t, newCounters)
}

func BenchmarkCounters(b *testing.B) {
	counterstest.Bench(b, newCounters)
}
