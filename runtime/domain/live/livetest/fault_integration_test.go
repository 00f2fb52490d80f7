//go:build integration

package livetest_test

import (
	"bufio"
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

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/recent/redisrecent"
	"github.com/concord-chat/concord/runtime/domain/live/relay/redisrelay"
	"github.com/concord-chat/concord/runtime/domain/live/router"
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
	cfg := livetest.RouterConfig(live.TopicsFor(prefix))
	r, err := router.New(cfg, router.Deps{Log: claimReporter{kl, cfg.Group}, Recent: cache, Relay: rl})
	if err != nil {
		fail(err)
	}
	if err := r.Run(ctx); err != nil {
		fail(err)
	}
}

// claimReporter prints each generation of the comments group a router
// process takes part in, with how many partitions it owns, so the test
// knows when the group is stable and which process owns the stream.
type claimReporter struct {
	live.Consumer
	group string
}

func (c claimReporter) Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error {
	if group == c.group {
		h = reportingHandler{h}
	}
	return c.Consumer.Consume(ctx, group, topics, h)
}

type reportingHandler struct{ eventlog.Handler }

func (r reportingHandler) Setup(ctx context.Context, s eventlog.Session) error {
	n := 0
	for _, ps := range s.Claims() {
		n += len(ps)
	}
	fmt.Printf("generation %d claims %d\n", s.Generation(), n)
	return r.Handler.Setup(ctx, s)
}

// routerProc is a router in its own process.
type routerProc struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	gen int64 // latest generation reported
	n   int   // partitions owned in it
}

func (p *routerProc) state() (gen int64, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen, p.n
}

// startRouter runs a router in its own process.
func startRouter(t *testing.T, topics live.Topics, redisPrefix string) *routerProc {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LIVE_TEST_ROUTER="+topics.Comments[:len(topics.Comments)-len("comments")],
		"LIVE_TEST_REDIS_PREFIX="+redisPrefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &routerProc{cmd: cmd, gen: -1}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var gen int64
			var n int
			if _, err := fmt.Sscanf(sc.Text(), "generation %d claims %d", &gen, &n); err == nil {
				p.mu.Lock()
				p.gen, p.n = gen, n
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

// owner waits until both routers report the same generation, one owning
// the partition and the other nothing (the group is stable with both
// members), and returns the owner.
func owner(t *testing.T, a, b *routerProc) *routerProc {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ga, na := a.state()
		gb, nb := b.state()
		if ga == gb && ga >= 0 && na+nb == 1 {
			if na == 1 {
				return a
			}
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("router group not stable with two members after 90 s: generations %d/%d, claims %d/%d", ga, gb, na, nb)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	// A second router joins the group. Which member the rebalance gives
	// the partition is the broker's choice; the test waits until the
	// group is stable with both (a kill during the join rebalance leaves
	// the coordinator waiting out the rebalance timeout for the dead
	// member, which is the failure this test once hit) and kills the
	// owner.
	second := startRouter(t, b.Topics, b.RedisPrefix)
	victim := owner(t, first, second)
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
				victim.cmd.Process.Signal(syscall.SIGKILL)
				t.Logf("router %d (the partition's owner) killed after comment %d", victim.cmd.Process.Pid, i)
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
