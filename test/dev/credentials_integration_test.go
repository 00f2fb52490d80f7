//go:build integration

package dev

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	redisctr "github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis/redistest"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/apirole"
)

// TestOpenCountersRedisPassword: the counters `concord dev` and the serve
// roles open (OpenCounters) authenticate with Config.RedisPassword
// (--redis-password, CONCORD_REDIS_PASSWORD) as the operator's pods set it:
// CONCORD_REDIS without credentials, the password beside it. Without it,
// or with a wrong one, opening fails with redis.ErrAuth.
func TestOpenCountersRedisPassword(t *testing.T) {
	const password = "pod-s3cret"
	addr := redistest.StartRequirePass(t, password)
	ctx := context.Background()
	base := config.Config{Redis: "redis://" + addr + "?prefix=platform-auth:", Logger: slog.New(slog.DiscardHandler)}

	ok := base
	ok.RedisPassword = password
	c, err := apirole.OpenCounters(ctx, ok)
	if err != nil {
		t.Fatalf("OpenCounters with --redis-password: %v", err)
	}
	if n, err := c.Incr(ctx, "k", 3, time.Minute); err != nil || n != 3 {
		t.Fatalf("Incr = %d, %v; want 3", n, err)
	}
	c.Close()

	// A password in the URL wins over a wrong --redis-password.
	inURL := base
	inURL.Redis = "redis://:" + password + "@" + addr
	inURL.RedisPassword = "stale"
	if c, err = apirole.OpenCounters(ctx, inURL); err != nil {
		t.Fatalf("OpenCounters with the password in the URL: %v", err)
	}
	c.Close()

	for name, pw := range map[string]string{"no password": "", "wrong password": "wrong-s3cret"} {
		bad := base
		bad.RedisPassword = pw
		c, err := apirole.OpenCounters(ctx, bad)
		if err == nil {
			c.Close()
			t.Fatalf("%s: OpenCounters succeeded", name)
		}
		if !errors.Is(err, redisctr.ErrAuth) {
			t.Fatalf("%s: err = %v, want redis.ErrAuth", name, err)
		}
		if pw != "" && strings.Contains(err.Error(), pw) {
			t.Fatalf("%s: error holds the password: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}
