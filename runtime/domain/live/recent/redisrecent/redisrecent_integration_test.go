//go:build integration

package redisrecent_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/recent/recenttest"
	"github.com/concord-chat/concord/runtime/domain/live/recent/redisrecent"
)

// Addr returns the Redis the test run started (CONCORD_REDIS, else
// CONCORD_TEST_REDIS); it fails, never skips, without one.
func Addr(t testing.TB) string {
	if a := os.Getenv("CONCORD_REDIS"); a != "" {
		return a
	}
	if a := os.Getenv("CONCORD_TEST_REDIS"); a != "" {
		return a
	}
	t.Fatal("CONCORD_REDIS (or CONCORD_TEST_REDIS) is not set: run `make test-deps` and source ~/.cache/concord/test-env.sh")
	return ""
}

func TestConformance(t *testing.T) {
	c, err := redisrecent.New(context.Background(), redisrecent.Config{Addr: Addr(t), Prefix: fmt.Sprintf("test%d:", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recenttest.Run(t, c)
}
