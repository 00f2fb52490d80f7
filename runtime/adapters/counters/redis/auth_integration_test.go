//go:build integration

package redis_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis/redistest"
)

// TestRequirePass: against a server started with --requirepass, the right
// password (in Config or in the URL) gives working counters; no password
// or a wrong one fails New with ErrAuth, whose text says what to fix and
// never holds the password.
func TestRequirePass(t *testing.T) {
	const password = "s3cret-pass"
	addr := redistest.StartRequirePass(t, password)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)

	fromURL, err := redis.ParseURL("redis://:" + password + "@" + addr + "?prefix=auth-test:")
	if err != nil {
		t.Fatal(err)
	}
	fromURL.Logger = quiet
	for name, cfg := range map[string]redis.Config{
		"config": {Addr: addr, Password: password, Prefix: "auth-test:", Logger: quiet},
		"url":    fromURL,
	} {
		c, err := redis.New(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: New with the right password: %v", name, err)
		}
		if n, err := c.Incr(ctx, "k-"+name, 2, time.Minute); err != nil || n != 2 {
			t.Fatalf("%s: Incr = %d, %v; want 2", name, n, err)
		}
		if n, err := c.Get(ctx, "k-"+name); err != nil || n != 2 {
			t.Fatalf("%s: Get = %d, %v; want 2", name, n, err)
		}
		c.Close()
	}

	for _, tc := range []struct{ name, password, reply string }{
		{"no password", "", "NOAUTH"},
		{"wrong password", "not-the-" + password, "WRONGPASS"},
	} {
		c, err := redis.New(ctx, redis.Config{Addr: addr, Password: tc.password, Logger: quiet})
		if err == nil {
			c.Close()
			t.Fatalf("%s: New succeeded", tc.name)
		}
		if !errors.Is(err, redis.ErrAuth) || errors.Is(err, counters.ErrUnavailable) {
			t.Fatalf("%s: err = %v, want ErrAuth (not ErrUnavailable)", tc.name, err)
		}
		msg := err.Error()
		t.Logf("%s: %s", tc.name, msg)
		if !strings.Contains(msg, tc.reply) || !strings.Contains(msg, "--redis-password") {
			t.Errorf("%s: error %q should quote the server's %s and name --redis-password", tc.name, msg, tc.reply)
		}
		if tc.password != "" && strings.Contains(msg, tc.password) {
			t.Errorf("%s: error holds the password: %q", tc.name, msg)
		}
	}
}
