package dataservice

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// gatedStore is a store.Messages whose reads block until the gate opens
// (when one is set) and which counts the queries it receives.
type gatedStore struct {
	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{} // receives once per read that reached the store
	msgs    map[snowflake.ID][]store.Message
	reads   atomic.Int64
	writes  atomic.Int64
	fail    error
}

func newGatedStore() *gatedStore {
	return &gatedStore{msgs: map[snowflake.ID][]store.Message{}, entered: make(chan struct{}, 1<<16)}
}

func (g *gatedStore) close(gate chan struct{}) { g.mu.Lock(); g.gate = gate; g.mu.Unlock() }

func (g *gatedStore) wait(ctx context.Context) error {
	g.reads.Add(1)
	g.entered <- struct{}{}
	g.mu.Lock()
	gate, fail := g.gate, g.fail
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fail
}

func (g *gatedStore) ListMessages(ctx context.Context, ch snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.msgs[ch])
	slices.Reverse(out)
	return out, nil
}

func (g *gatedStore) GetMessage(ctx context.Context, ch, id snowflake.ID) (store.Message, error) {
	if err := g.wait(ctx); err != nil {
		return store.Message{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.msgs[ch] {
		if m.ID == id {
			return m, nil
		}
	}
	return store.Message{}, store.ErrNotFound
}

func (g *gatedStore) Buckets(ctx context.Context, ch snowflake.ID) ([]int64, error) {
	return nil, g.wait(ctx)
}

func (g *gatedStore) PutMessage(ctx context.Context, m store.Message) error {
	g.writes.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.msgs[m.ChannelID] = append(g.msgs[m.ChannelID], m)
	return nil
}

func (g *gatedStore) DeleteMessage(ctx context.Context, ch, id snowflake.ID) error { return nil }
func (g *gatedStore) DeleteMessages(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	return nil
}

// awaitEntered waits until n reads reached the store.
func (g *gatedStore) awaitEntered(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case <-g.entered:
		case <-timeout:
			t.Fatalf("fewer than %d reads reached the store", n)
		}
	}
}

// awaitRequests waits until s has received n requests.
func awaitRequests(t *testing.T, s *Service, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Requests < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d requests arrived", s.Stats().Requests, n)
		}
		time.Sleep(time.Millisecond) // polling a condition, not standing in for it
	}
}

// awaitWaiting waits until n callers wait on s's queries in flight.
func awaitWaiting(t *testing.T, s *Service, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.flights.waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d callers waiting", s.flights.waiting(), n)
		}
		time.Sleep(time.Millisecond) // polling a condition, not standing in for it
	}
}

func TestCoalescing(t *testing.T) {
	st := newGatedStore()
	ctx := context.Background()
	ch := snowflake.ID(7)
	for i := 1; i <= 3; i++ {
		st.PutMessage(ctx, store.Message{ID: snowflake.ID(i), ChannelID: ch})
	}
	gate := make(chan struct{})
	st.close(gate)
	s := New(st, Config{})
	const n = 1000
	var wg sync.WaitGroup
	results := make([][]store.Message, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.ListMessages(ctx, ch, store.HistoryQuery{Limit: 50})
		}()
	}
	st.awaitEntered(t, 1)
	awaitWaiting(t, s, n)
	close(gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || len(results[i]) != 3 || results[i][0].ID != 3 {
			t.Fatalf("request %d: %v %v", i, results[i], errs[i])
		}
	}
	if got := st.reads.Load(); got != 1 {
		t.Fatalf("store saw %d queries for %d identical reads, want 1", got, n)
	}
	stats := s.Stats()
	if stats.Reads != n || stats.Queries != 1 || stats.Coalesced != n-1 {
		t.Fatalf("stats %+v", stats)
	}
	// Each caller owns its top-level slice.
	results[0][0] = store.Message{}
	if results[1][0].ID != 3 {
		t.Fatal("callers share the result slice")
	}
	if top := s.TopChannels(5); len(top) != 1 || top[0].ChannelID != ch || top[0].Requests != n || top[0].Coalesced != n-1 {
		t.Fatalf("TopChannels: %+v", top)
	}
	// Different queries are not merged.
	st.close(nil)
	s.ListMessages(ctx, ch, store.HistoryQuery{Limit: 10})
	s.ListMessages(ctx, ch, store.HistoryQuery{Limit: 10, Before: 3})
	s.GetMessage(ctx, ch, 3)
	if got := st.reads.Load(); got != 4 {
		t.Fatalf("store saw %d queries, want 4", got)
	}
}

// TestLinger: a finished read stays joinable for Linger, until a write to
// the channel completes.
func TestLinger(t *testing.T) {
	st := newGatedStore()
	ctx := context.Background()
	ch := snowflake.ID(11)
	s := New(st, Config{Linger: time.Hour})
	s.ListMessages(ctx, ch, store.HistoryQuery{})
	s.ListMessages(ctx, ch, store.HistoryQuery{})
	if st.reads.Load() != 1 || s.Stats().Coalesced != 1 {
		t.Fatalf("second read within Linger: %d queries, stats %+v", st.reads.Load(), s.Stats())
	}
	if err := s.PutMessage(ctx, store.Message{ID: 1, ChannelID: ch}); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.ListMessages(ctx, ch, store.HistoryQuery{}); len(m) != 1 || st.reads.Load() != 2 {
		t.Fatalf("read after a write: %v, %d queries", m, st.reads.Load())
	}
	// Negative Linger: only reads in flight merge.
	st2 := newGatedStore()
	s2 := New(st2, Config{Linger: -1})
	s2.ListMessages(ctx, ch, store.HistoryQuery{})
	s2.ListMessages(ctx, ch, store.HistoryQuery{})
	if st2.reads.Load() != 2 {
		t.Fatalf("without Linger: %d queries, want 2", st2.reads.Load())
	}
	// Failed reads never linger.
	st3 := newGatedStore()
	st3.fail = store.ErrUnavailable
	s3 := New(st3, Config{Linger: time.Hour})
	s3.ListMessages(ctx, ch, store.HistoryQuery{})
	s3.ListMessages(ctx, ch, store.HistoryQuery{})
	if st3.reads.Load() != 2 {
		t.Fatalf("failed reads: %d queries, want 2", st3.reads.Load())
	}
}

func TestCoalescingDisabled(t *testing.T) {
	st := newGatedStore()
	s := New(st, Config{DisableCoalescing: true})
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.ListMessages(context.Background(), 1, store.HistoryQuery{})
		}()
	}
	wg.Wait()
	if st.reads.Load() != 50 || s.Stats().Coalesced != 0 {
		t.Fatalf("reads %d, stats %+v", st.reads.Load(), s.Stats())
	}
}

// TestReadYourWrites: a read that arrives after a write completed never
// joins a query that started before the write.
func TestReadYourWrites(t *testing.T) {
	st := newGatedStore()
	gate := make(chan struct{})
	st.close(gate)
	s := New(st, Config{})
	ctx := context.Background()
	ch := snowflake.ID(9)
	first := make(chan []store.Message)
	go func() {
		m, _ := s.ListMessages(ctx, ch, store.HistoryQuery{})
		first <- m
	}()
	st.awaitEntered(t, 1)
	if err := s.PutMessage(ctx, store.Message{ID: 1, ChannelID: ch}); err != nil {
		t.Fatal(err)
	}
	second := make(chan []store.Message)
	go func() {
		m, _ := s.ListMessages(ctx, ch, store.HistoryQuery{})
		second <- m
	}()
	st.awaitEntered(t, 1) // a second query reached the store
	close(gate)
	<-first
	if m := <-second; len(m) != 1 {
		t.Fatalf("read after the write: %v", m)
	}
}

// TestWaiterLeaves: a waiter whose context ends leaves; the query and the
// other waiters carry on.
func TestWaiterLeaves(t *testing.T) {
	st := newGatedStore()
	gate := make(chan struct{})
	st.close(gate)
	s := New(st, Config{})
	ch := snowflake.ID(3)
	impatient, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() {
		_, err := s.ListMessages(impatient, ch, store.HistoryQuery{})
		errc <- err
	}()
	st.awaitEntered(t, 1)
	go func() {
		_, err := s.ListMessages(context.Background(), ch, store.HistoryQuery{})
		errc <- err
	}()
	awaitWaiting(t, s, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("impatient waiter: %v", err)
	}
	close(gate)
	if err := <-errc; err != nil {
		t.Fatalf("patient waiter: %v", err)
	}
	if st.reads.Load() != 1 {
		t.Fatalf("%d queries", st.reads.Load())
	}
}

// mutableRing is a Ring whose members tests change.
type mutableRing struct {
	mu    sync.Mutex
	nodes []string
}

func (r *mutableRing) set(nodes ...string) { r.mu.Lock(); r.nodes = nodes; r.mu.Unlock() }

func (r *mutableRing) Owner(id snowflake.ID) (registry.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := registry.NewRing(r.nodes, nil, 16).Owner(uint64(id))
	return registry.Node{Name: name}, ok
}

// TestInstanceDiesMidStorm: the owner of a hot channel is closed while
// hundreds of reads wait on it; they fail over to the new owner and every
// request succeeds.
func TestInstanceDiesMidStorm(t *testing.T) {
	st := newGatedStore()
	ctx := context.Background()
	ch := snowflake.ID(12345)
	st.PutMessage(ctx, store.Message{ID: 1, ChannelID: ch})
	gate := make(chan struct{})
	st.close(gate)
	instances := map[string]*Service{"a": New(st, Config{Name: "a"}), "b": New(st, Config{Name: "b"})}
	ring := &mutableRing{}
	ring.set("a", "b")
	owner, _ := ring.Owner(ch)
	other := "b"
	if owner.Name == "b" {
		other = "a"
	}
	r, err := NewRouter(RouterConfig{Ring: ring, Backoff: time.Millisecond,
		Dial: func(_ context.Context, n registry.Node) (store.Messages, error) { return instances[n.Name], nil }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := r.ListMessages(ctx, ch, store.HistoryQuery{})
			if err != nil || len(m) != 1 {
				failed.Add(1)
				t.Errorf("read: %v %v", m, err)
			}
		}()
	}
	st.awaitEntered(t, 1)
	awaitRequests(t, instances[owner.Name], n)
	// The owner dies: its waiters fail, the ring drops it, they retry.
	ring.set(other)
	instances[owner.Name].Close()
	st.awaitEntered(t, 1) // the new owner ran the query again
	awaitWaiting(t, instances[other], n)
	close(gate)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	if got := instances[other].Stats(); got.Reads != n || got.Queries != 1 {
		t.Fatalf("new owner stats %+v, want %d reads in 1 query", got, n)
	}
	// A write during the outage lands on the new owner too.
	if err := r.PutMessage(ctx, store.Message{ID: 2, ChannelID: ch}); err != nil {
		t.Fatal(err)
	}
	if _, err := instances[owner.Name].ListMessages(ctx, ch, store.HistoryQuery{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("closed instance: %v", err)
	}
}

func TestRouterNoInstance(t *testing.T) {
	ring := &mutableRing{}
	r, _ := NewRouter(RouterConfig{Ring: ring, MaxAttempts: 2, Backoff: time.Millisecond,
		Dial: func(context.Context, registry.Node) (store.Messages, error) { return nil, errors.New("unreachable") }})
	if _, err := r.ListMessages(context.Background(), 1, store.HistoryQuery{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("empty ring: %v", err)
	}
	ring.set("x")
	if err := r.PutMessage(context.Background(), store.Message{ID: 1, ChannelID: 1}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("unreachable instance: %v", err)
	}
}

// TestStoreUnavailable: a store outage reaches the caller as
// store.ErrUnavailable (the API answers 503), never as success.
func TestStoreUnavailable(t *testing.T) {
	st := newGatedStore()
	st.fail = errors.Join(store.ErrUnavailable)
	s := New(st, Config{})
	if _, err := s.ListMessages(context.Background(), 1, store.HistoryQuery{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("read: %v", err)
	}
}

func TestTopChannelsCollector(t *testing.T) {
	st := newGatedStore()
	s := New(st, Config{Name: "d1", TopChannels: 4})
	ctx := context.Background()
	for ch := 1; ch <= 6; ch++ {
		for range ch * 10 {
			s.GetMessage(ctx, snowflake.ID(ch), 1)
		}
	}
	top := s.TopChannels(3)
	// Space-saving counts are upper bounds: 6 took over 2's counter (20).
	if len(top) != 3 || top[0].ChannelID != 6 || top[0].Requests != 80 || top[1].ChannelID != 5 || top[2].ChannelID != 4 {
		t.Fatalf("TopChannels: %+v", top)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 2 || len(mfs[1].Metric) != 4 {
		t.Fatalf("collected %d families: %v", len(mfs), mfs)
	}
}
