package livetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/relay/tree"
	"github.com/concord-chat/concord/runtime/domain/live/router"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// arrivals records when each comment reached a viewer.
type arrivals struct {
	mu   sync.Mutex
	seqs []int64
	at   []time.Time
}

func (a *arrivals) follow(v *sse.Stream) {
	for {
		ev, err := v.Next()
		if err != nil {
			return
		}
		if ev.Type != "comment" {
			continue
		}
		var c livetest.Comment
		json.Unmarshal(ev.Data, &c)
		a.mu.Lock()
		a.seqs = append(a.seqs, c.Seq)
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
	}
}

// pauseAfter returns the longest wait between two comments shown after
// t0, and checks the seqs strictly increase (no duplicate, no reorder).
func (a *arrivals) pauseAfter(t *testing.T, t0 time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var worst time.Duration
	for i := 1; i < len(a.at); i++ {
		if a.seqs[i] <= a.seqs[i-1] {
			t.Fatalf("seq %d after %d", a.seqs[i], a.seqs[i-1])
		}
		if a.at[i].After(t0) {
			worst = max(worst, a.at[i].Sub(a.at[i-1]))
		}
	}
	return worst
}

func (a *arrivals) has(seq int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.seqs {
		if s == seq {
			return true
		}
	}
	return false
}

// Kill the roles in turn under a steady stream of comments (one every
// 50 ms) and measure what a viewer sees: the longest pause between two
// comments, and that every comment posted arrives once, in order. The
// relay is a three-node tree; the relay that owns the stream dies
// first (publishers and subscribers move to the next node by
// rendezvous; the gateway refills the lost batches from the recent
// cache), then one of the two routers of the group (the other takes the
// partition over and republishes from the committed offset; the gateway
// drops what it already sent).
func TestKillRolesInTurn(t *testing.T) {
	var urls []string
	var srvs []*httptest.Server
	var nodes []*tree.Node
	for range 3 {
		var node *tree.Node
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { node.ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		node = tree.NewNode(tree.NodeConfig{Self: srv.URL, Logger: slog.New(slog.DiscardHandler)})
		urls, srvs = append(urls, srv.URL), append(srvs, srv)
		nodes = append(nodes, node)
	}
	for _, n := range nodes {
		n.SetNodes(urls)
	}
	e := livetest.Start(t, livetest.Backends{Relay: tree.NewClient(urls, slog.New(slog.DiscardHandler))}, livetest.Options{NoRouter: true})
	// Two routers of one group, each with its own metrics, so the test
	// knows which one owns the stream's partition (the one publishing).
	type member struct {
		kill context.CancelFunc
		reg  *prometheus.Registry
	}
	var routers []member
	for range 2 {
		ctx, kill := context.WithCancel(context.Background())
		defer kill()
		reg := prometheus.NewRegistry()
		cfg := livetest.RouterConfig(e.B.Topics)
		cfg.Registerer = reg
		r, err := router.New(cfg, router.Deps{Log: e.B.Log, Recent: e.B.Cache, Relay: e.B.Relay, Board: e.B.Board})
		if err != nil {
			t.Fatal(err)
		}
		go r.Run(ctx)
		routers = append(routers, member{kill: kill, reg: reg})
	}
	published := func(m member) float64 {
		mfs, _ := m.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "concord_live_router_batches_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	alice := e.NewUser()
	s := e.CreateStream(alice, "steady")
	v, err := sse.Dial(context.Background(), nil, e.URL+"/v1/streams/"+s.ID+"/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	arr := &arrivals{}
	go arr.follow(v)

	var mu sync.Mutex
	var posted []livetest.Comment
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			c := e.Post(alice, s.ID, fmt.Sprintf("steady %d", i), 0)
			mu.Lock()
			posted = append(posted, c)
			mu.Unlock()
		}
	}()
	waitAll := func() {
		t.Helper()
		mu.Lock()
		last := posted[len(posted)-1]
		mu.Unlock()
		e.Eventually(30*time.Second, func() string {
			if !arr.has(last.Seq) {
				return "the viewer has not got the last comment posted"
			}
			return ""
		})
	}
	time.Sleep(time.Second) // a steady state to compare with, not a wait for an event
	waitAll()
	id, _ := snowflake.Parse(s.ID)
	relayOwner := tree.Owner(id, urls, nil)
	for i, u := range urls {
		if u == relayOwner {
			t0 := time.Now()
			srvs[i].Listener.Close()
			srvs[i].CloseClientConnections()
			time.Sleep(3 * time.Second) // the flow goes on across the kill
			waitAll()
			t.Logf("relay owner killed: longest pause a viewer saw %s", arr.pauseAfter(t, t0).Round(time.Millisecond))
		}
	}
	before := []float64{published(routers[0]), published(routers[1])}
	time.Sleep(500 * time.Millisecond) // some batches, to see who publishes
	owner := 0
	if published(routers[1])-before[1] > published(routers[0])-before[0] {
		owner = 1
	}
	t0 := time.Now()
	routers[owner].kill()
	time.Sleep(8 * time.Second) // the flow goes on across the rebalance
	waitAll()
	t.Logf("the router owning the stream killed (the other of the group takes over): longest pause a viewer saw %s", arr.pauseAfter(t, t0).Round(time.Millisecond))
	close(stop)
	<-done
	waitAll()
	mu.Lock()
	defer mu.Unlock()
	for _, c := range posted {
		if !arr.has(c.Seq) {
			t.Fatalf("%q (seq %d) never reached the viewer", c.Text, c.Seq)
		}
	}
}
