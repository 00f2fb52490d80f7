//go:build integration

package dataservice_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/adapters/store/storetest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/dataservice"
)

// The storm benchmark needs the Cassandra `make test` starts:
//
//	export CONCORD_CASSANDRA="$(hack/cassandra/start.sh)"
//	go test -tags integration -run '^$' -bench OpenChannelStorm -benchtime 1x ./runtime/services/dataservice/

func cassandraStore(b testing.TB) *cassandra.Store {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		b.Fatal("CONCORD_CASSANDRA is not set: run `make test`, or " +
			"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` first")
	}
	ks := fmt.Sprintf("concord_storm_%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{addr}, Keyspace: ks, ReplicationFactor: 1,
		Timeout: time.Minute, NumConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		s.Close()
		c := gocql.NewCluster(addr)
		c.Timeout = time.Minute
		if sess, err := c.CreateSession(); err == nil {
			sess.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			sess.Close()
		}
	})
	return s
}

// ring is a Ring over a fixed, changeable set of instance names.
type ring struct {
	mu    sync.Mutex
	nodes []string
}

func (r *ring) set(n ...string) { r.mu.Lock(); r.nodes = n; r.mu.Unlock() }
func (r *ring) Owner(id snowflake.ID) (registry.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := registry.NewRing(r.nodes, nil, 16).Owner(uint64(id))
	return registry.Node{Name: name}, ok
}

type stormResult struct {
	requests, failed int
	queries          uint64
	lat              []time.Duration
	took             time.Duration
}

// storm sends n "open channel" reads (the newest 50 messages) of ch,
// arriving evenly over spread, through a Router in front of the given
// instances; kill, when set, runs halfway through.
func storm(ctx context.Context, r *dataservice.Router, ch snowflake.ID, n int, spread time.Duration, kill func()) stormResult {
	res := stormResult{requests: n, lat: make([]time.Duration, n)}
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	step := spread / time.Duration(n)
	for i := range n {
		at := start.Add(time.Duration(i) * step)
		if d := time.Until(at); d > 0 {
			time.Sleep(d) // pacing the arrivals
		}
		if kill != nil && i == n/2 {
			kill()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			page, err := r.ListMessages(ctx, ch, store.HistoryQuery{Limit: 50})
			res.lat[i] = time.Since(at)
			if err != nil || len(page) != 50 {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	res.took = time.Since(start)
	res.failed = int(failed.Load())
	slices.Sort(res.lat)
	return res
}

func (r stormResult) pct(p float64) time.Duration { return r.lat[int(p*float64(len(r.lat)-1))] }

// BenchmarkOpenChannelStorm: 30,000 reads of one channel's newest page
// arriving within 3 seconds, through the data service to Cassandra:
// coalesced (defaults: reads in flight plus a 10ms linger), coalescing
// reads in flight only, without coalescing, and coalesced while the owning
// instance is killed halfway through. Reported per storm: queries that reached
// Cassandra per 100 requests, p50/p99 latency, failed requests.
func BenchmarkOpenChannelStorm(b *testing.B) {
	st := cassandraStore(b)
	ctx := context.Background()
	ch := snowflake.ID(rand.Uint64() >> 2)
	t0 := time.Now().Add(-time.Hour)
	for i := range 200 {
		m := store.Message{ID: snowflake.FromTime(t0.Add(time.Duration(i)*time.Second)) | 1, ChannelID: ch,
			AuthorID: 42, Content: "storm message with a few words in it, like people write"}
		if err := st.PutMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	const n = 30000
	const spread = 3 * time.Second
	for _, mode := range []string{"coalesced", "inflight-only", "plain", "coalesced-owner-killed"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				instances := map[string]*dataservice.Service{}
				for _, name := range []string{"a", "b"} {
					cfg := dataservice.Config{Name: name, DisableCoalescing: mode == "plain", QueryTimeout: time.Minute}
					if mode == "inflight-only" {
						cfg.Linger = -1
					}
					instances[name] = dataservice.New(st, cfg)
				}
				rg := &ring{}
				rg.set("a", "b")
				r, err := dataservice.NewRouter(dataservice.RouterConfig{Ring: rg, Backoff: 5 * time.Millisecond,
					Dial: func(_ context.Context, n registry.Node) (store.Messages, error) { return instances[n.Name], nil }})
				if err != nil {
					b.Fatal(err)
				}
				var kill func()
				if mode == "coalesced-owner-killed" {
					kill = func() {
						owner, _ := rg.Owner(ch)
						other := "a"
						if owner.Name == "a" {
							other = "b"
						}
						rg.set(other)
						instances[owner.Name].Close()
					}
				}
				res := storm(ctx, r, ch, n, spread, kill)
				res.queries = instances["a"].Stats().Queries + instances["b"].Stats().Queries
				b.ReportMetric(100*float64(res.queries)/float64(n), "queries/100req")
				b.ReportMetric(float64(res.pct(0.5).Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(res.pct(0.99).Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(res.failed), "failed")
				b.Logf("%s: %d requests in %v, %d queries to Cassandra (%.2f%%), p50 %v p99 %v max %v, %d failed",
					mode, n, res.took.Round(time.Millisecond), res.queries, 100*float64(res.queries)/float64(n),
					res.pct(0.5).Round(time.Microsecond), res.pct(0.99).Round(time.Microsecond),
					res.lat[n-1].Round(time.Microsecond), res.failed)
				if res.failed > 0 {
					b.Errorf("%d requests failed", res.failed)
				}
			}
		})
	}
}

// TestCassandraThroughDataService runs the storage conformance suite
// against Cassandra with the data service (coalescing on) in front.
func TestCassandraThroughDataService(t *testing.T) {
	st := cassandraStore(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return dataservice.Wrap(nopClose{st, st}, dataservice.New(st, dataservice.Config{}))
	})
}

// nopClose keeps the suite from closing the shared store between groups;
// the store's outbox stays visible to Wrap.
type nopClose struct {
	store.Store
	store.Outbox
}

func (nopClose) Close() error { return nil }

// TestNoAcknowledgedSendLost: writers send through the Router while the
// owning data instance is killed; every send that returned nil is in
// Cassandra afterwards, and no send failed for good (they retried on the
// new owner).
func TestNoAcknowledgedSendLost(t *testing.T) {
	st := cassandraStore(t)
	ctx := context.Background()
	instances := map[string]*dataservice.Service{
		"a": dataservice.New(st, dataservice.Config{Name: "a"}),
		"b": dataservice.New(st, dataservice.Config{Name: "b"}),
	}
	rg := &ring{}
	rg.set("a", "b")
	r, err := dataservice.NewRouter(dataservice.RouterConfig{Ring: rg, Backoff: 5 * time.Millisecond,
		Dial: func(_ context.Context, n registry.Node) (store.Messages, error) { return instances[n.Name], nil }})
	if err != nil {
		t.Fatal(err)
	}
	ch := snowflake.ID(rand.Uint64() >> 2)
	owner, _ := rg.Owner(ch)
	other := "a"
	if owner.Name == "a" {
		other = "b"
	}
	const writers, each = 16, 60
	var acked sync.Map
	var failed atomic.Int64
	var sent atomic.Int64
	killed := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := snowflake.FromTime(t0.Add(time.Duration(w*each+i)*time.Millisecond)) | snowflake.ID(w)
				err := r.PutMessage(ctx, store.Message{ID: id, ChannelID: ch, AuthorID: 1, Content: "x"})
				if err != nil {
					failed.Add(1)
					t.Errorf("send %v: %v", id, err)
					continue
				}
				acked.Store(id, true)
				if sent.Add(1) == writers*each/2 {
					rg.set(other)
					instances[owner.Name].Close()
					close(killed)
				}
			}
		}()
	}
	wg.Wait()
	<-killed
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if _, err := st.GetMessage(ctx, ch, k.(snowflake.ID)); err != nil {
			t.Errorf("acknowledged message %v: %v", k, err)
		}
		return true
	})
	if n != writers*each || failed.Load() != 0 {
		t.Fatalf("%d acknowledged, %d failed, want %d and 0", n, failed.Load(), writers*each)
	}
	if instances[other].Stats().Requests == 0 {
		t.Fatal("the new owner served nothing")
	}
}
