//go:build integration

package livetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/live"
	"github.com/concord-chat/concord/runtime/live/livetest"
	"github.com/concord-chat/concord/runtime/live/recent/redisrecent"
	"github.com/concord-chat/concord/runtime/live/relay/redisrelay"
	"github.com/concord-chat/concord/runtime/live/router"
)

// TestMain doubles as the router process of the fault test: with
// LIVE_TEST_ROUTER set, the test binary runs one live router on Kafka
// and Redis until it is killed.
func TestMain(m *testing.M) {
	if prefix := os.Getenv("LIVE_TEST_ROUTER"); prefix != "" {
		runRouterProcess(prefix)
		return
	}
	os.Exit(m.Run())
}

func runRouterProcess(prefix string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "router process:", err)
		os.Exit(2)
	}
	kl, err := kafka.New(ctx, kafka.Config{Brokers: []string{os.Getenv("CONCORD_KAFKA")}, Partitions: 4, SessionTimeout: 6 * time.Second})
	if err != nil {
		fail(err)
	}
	raddr := os.Getenv("CONCORD_REDIS")
	if raddr == "" {
		raddr = os.Getenv("CONCORD_TEST_REDIS")
	}
	run := os.Getenv("LIVE_TEST_REDIS_PREFIX")
	cache, err := redisrecent.New(ctx, redisrecent.Config{Addr: raddr, Prefix: run})
	if err != nil {
		fail(err)
	}
	rl, err := redisrelay.New(ctx, redisrelay.Config{Addr: raddr, Prefix: run})
	if err != nil {
		fail(err)
	}
	r, err := router.New(livetest.RouterConfig(live.TopicsFor(prefix)), router.Deps{Log: kl, Recent: cache, Relay: rl})
	if err != nil {
		fail(err)
	}
	fmt.Println("router ready")
	if err := r.Run(ctx); err != nil {
		fail(err)
	}
}

// startRouter runs a router in its own process.
func startRouter(t *testing.T, topics live.Topics, redisPrefix string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LIVE_TEST_ROUTER="+topics.Comments[:len(topics.Comments)-len("comments")],
		"LIVE_TEST_REDIS_PREFIX="+redisPrefix)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestRouterKill9 posts a steady flow while the router owning the
// stream's partition is killed with SIGKILL: the viewer sees a pause and
// then every comment exactly once, in seq order.
func TestRouterKill9(t *testing.T) {
	b := livetest.RealBackends(t)
	// One partition: the first router owns it, the second waits.
	if err := b.Log.EnsureTopic(context.Background(), b.Topics.Comments, 1); err != nil {
		t.Fatal(err)
	}
	e := livetest.Start(t, b, livetest.Options{NoRouter: true})
	first := startRouter(t, b.Topics, b.RedisPrefix)
	alice := e.NewUser()
	s := e.CreateStream(alice, "fault")
	v := livetest.Watch(t, e.URL, s.ID, nil, "")
	v.Next(livetest.Wait*2, "state")
	warm := e.Post(alice, s.ID, "warm-up", 0)
	if got := v.Comments(1, 60*time.Second); got[0].ID != warm.ID {
		t.Fatalf("warm-up = %+v", got)
	}
	// The successor joins the group now, so it owns nothing until the
	// first one dies.
	second := startRouter(t, b.Topics, b.RedisPrefix)
	_ = second
	const n = 120
	var mu sync.Mutex
	var posted []livetest.Comment
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			c := e.Post(alice, s.ID, fmt.Sprintf("flow %03d", i), int64(i))
			mu.Lock()
			posted = append(posted, c)
			mu.Unlock()
			time.Sleep(40 * time.Millisecond)
			if i == 30 {
				first.Process.Signal(syscall.SIGKILL)
				t.Logf("router %d killed after comment %d", first.Process.Pid, i)
			}
		}
	}()
	seen := map[string]bool{}
	var last int64 = warm.Seq
	var maxPause time.Duration
	prev := time.Now()
	for len(seen) < n {
		ev := v.Next(90*time.Second, "comment")
		if p := time.Since(prev); p > maxPause {
			maxPause = p
		}
		prev = time.Now()
		var c livetest.Comment
		json.Unmarshal(ev.Data, &c)
		seq, _ := strconv.ParseInt(ev.ID, 10, 64)
		if seen[c.ID] {
			t.Fatalf("duplicate %s (seq %d)", c.Text, seq)
		}
		if seq <= last {
			t.Fatalf("seq %d after %d", seq, last)
		}
		seen[c.ID], last = true, seq
	}
	<-done
	for _, c := range posted {
		if !seen[c.ID] {
			t.Fatalf("gap: %s (seq %d) never delivered", c.Text, c.Seq)
		}
	}
	v.Quiet(time.Second, "comment")
	t.Logf("longest pause %s", maxPause)
	if maxPause < time.Second {
		t.Fatalf("no pause (%s): the killed router did not own the stream", maxPause)
	}
}
