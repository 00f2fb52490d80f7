//go:build integration

package redisrelay_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/relay/redisrelay"
	"github.com/concord-chat/concord/runtime/domain/live/relay/relaytest"
)

func addr(t testing.TB) string {
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
	cfg := redisrelay.Config{Addr: addr(t), Prefix: fmt.Sprintf("test%d:", time.Now().UnixNano())}
	pub, err := redisrelay.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sub, err := redisrelay.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	relaytest.Run(t, pub, sub)
}
