//go:build faults

package faults

import (
	"bufio"
	"context"
	"fmt"
	gonet "net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// redisServer is the live roles' own Redis for one run, on a loopback
// address of its own, so that the nemesis can kill it: the shared test
// Redis (CONCORD_TEST_REDIS) serves other tests. It keeps an append-only
// file synced every second, as a Redis deployed for the recent cache and
// counters would, so a restart brings back what it had, short of the
// last second.
type redisServer struct {
	child
	addr string
	port int
}

// startRedis starts redis-server on 127.0.0.41:6379 and waits for its
// PONG.
func startRedis(t *testing.T, ctx context.Context) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("no redis-server on PATH for the live roles' own Redis: hack/test-deps.sh installs it")
	}
	r := &redisServer{child: child{name: "redis"}, addr: "127.0.0.41", port: 6379}
	r.argv = []string{bin, "--bind", r.addr, "--port", fmt.Sprint(r.port), "--dir", t.TempDir(),
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "no", "--logfile", ""}
	if err := r.run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.kill() })
	if err := r.awaitPong(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *redisServer) hostport() string { return fmt.Sprintf("%s:%d", r.addr, r.port) }

// awaitPong polls PING until Redis answers PONG (it answers LOADING
// while it replays its append-only file).
func (r *redisServer) awaitPong(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if c, err := gonet.DialTimeout("tcp", r.hostport(), time.Second); err == nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		select {
		case <-r.exited():
			return fmt.Errorf("redis exited:\n%s", r.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polled: Redis says nothing when it is ready
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis not answering within %v:\n%s", timeout, r.logs.String())
		}
	}
}

func (r *redisServer) target() *target {
	tg := &target{name: "redis", kind: "redis"}
	tg.pid = r.pid
	tg.endpoints = func() ([]endpoint, error) { return []endpoint{{Addr: r.addr, Port: r.port}}, nil }
	tg.kill = r.kill
	tg.start = func(ctx context.Context) error {
		if err := r.run(); err != nil {
			return err
		}
		return r.awaitPong(ctx, time.Minute)
	}
	return tg
}
