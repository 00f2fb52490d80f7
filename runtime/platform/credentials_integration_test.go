//go:build integration

package platform

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

	redisctr "github.com/concord-chat/concord/runtime/counters/redis"
)

// startRequirePassRedis runs redis-server (from PATH) on a free loopback
// port with --requirepass and no persistence until the test ends.
func startRequirePassRedis(t *testing.T, password string) string {
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
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within 10s: %v\n%s", addr, err, out.String())
		}
	}
}

// TestOpenCountersRedisPassword: the counters `concord dev` and the serve
// roles open (OpenCounters) authenticate with Config.RedisPassword
// (--redis-password, CONCORD_REDIS_PASSWORD) as the operator's pods set it:
// CONCORD_REDIS without credentials, the password beside it. Without it,
// or with a wrong one, opening fails with redis.ErrAuth.
func TestOpenCountersRedisPassword(t *testing.T) {
	const password = "pod-s3cret"
	addr := startRequirePassRedis(t, password)
	ctx := context.Background()
	base := Config{Redis: "redis://" + addr + "?prefix=platform-auth:", Logger: slog.New(slog.DiscardHandler)}

	ok := base
	ok.RedisPassword = password
	c, err := OpenCounters(ctx, ok)
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
	if c, err = OpenCounters(ctx, inURL); err != nil {
		t.Fatalf("OpenCounters with the password in the URL: %v", err)
	}
	c.Close()

	for name, pw := range map[string]string{"no password": "", "wrong password": "wrong-s3cret"} {
		bad := base
		bad.RedisPassword = pw
		c, err := OpenCounters(ctx, bad)
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
