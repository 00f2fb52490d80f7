//go:build integration

package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/counters/redis"
)

// startAuthRedis runs redis-server (from PATH) on a free loopback port with
// --requirepass password and no persistence, stops it when the test ends,
// and returns its address once it accepts connections.
func startAuthRedis(t *testing.T, password string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not on PATH: install it (apt-get install redis-server, or run hack/redis/start.sh once as root)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var out strings.Builder
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--requirepass", password,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within 10s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRequirePass: against a server started with --requirepass, the right
// password (in Config or in the URL) gives working counters; no password
// or a wrong one fails New with ErrAuth, whose text says what to fix and
// never holds the password.
func TestRequirePass(t *testing.T) {
	const password = "s3cret-pass"
	addr := startAuthRedis(t, password)
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
