// Package eventlogtest is the conformance suite of the eventlog port. Every
// adapter runs it: memlog always, kafka against the broker `make test`
// starts. Each case uses fresh topic and group names, so the suite can share
// one broker with earlier runs.
package eventlogtest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// NewFunc opens a Log for one test. It registers its own cleanup
// (t.Cleanup) and may be called several times in one test; all logs opened
// in one test see the same data.
type NewFunc func(t testing.TB) eventlog.Log

// Timeout bounds each case; Kafka rebalances take a few seconds.
var Timeout = 90 * time.Second

// Run runs the conformance suite.
func Run(t *testing.T, newLog NewFunc) {
	cases := []struct {
		name string
		fn   func(*testing.T, NewFunc)
	}{
		{"OrderPerKey", testOrderPerKey},
		{"PartitionCount", testPartitionCount},
		{"ResumeFromCommitted", testResumeFromCommitted},
		{"UncommittedRedelivered", testUncommittedRedelivered},
		{"IndependentGroups", testIndependentGroups},
		{"Rebalance", testRebalance},
		{"HandlerErrorStopsAndRedelivers", testHandlerError},
		{"Inspector", testInspector},
		{"Close", testClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newLog) })
	}
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// Name returns a topic or group name unique to this test and run.
func Name(t testing.TB, what string) string {
	return fmt.Sprintf("conf.%s.%s.%d", unsafeChars.ReplaceAllString(t.Name(), "-"), what, time.Now().UnixNano())
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

type rec struct {
	key, value string
	part       int32
	off        int64
}

// appendN appends n records spread over keys (value "k<key>/<i>") in
// batches of batch records and returns them in append order.
func appendN(ctx context.Context, t testing.TB, l eventlog.Log, topic string, keys, n, batch int, prefix string) []rec {
	t.Helper()
	var out []rec
	var rs []eventlog.Record
	flush := func() {
		if len(rs) == 0 {
			return
		}
		if err := l.Append(ctx, rs...); err != nil {
			t.Fatalf("Append: %v", err)
		}
		rs = rs[:0]
	}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("key-%d", i%keys)
		v := fmt.Sprintf("%s%s/%d", prefix, k, i)
		rs = append(rs, eventlog.Record{Topic: topic, Key: []byte(k), Value: []byte(v)})
		out = append(out, rec{key: k, value: v})
		if len(rs) == batch {
			flush()
		}
	}
	flush()
	return out
}

// collector gathers delivered records and wakes waiters.
type collector struct {
	mu   sync.Mutex
	got  []rec
	seen map[string]int
	wake chan struct{}
}

func newCollector() *collector {
	return &collector{seen: map[string]int{}, wake: make(chan struct{}, 1)}
}

func (c *collector) add(r eventlog.Record) {
	c.mu.Lock()
	c.got = append(c.got, rec{key: string(r.Key), value: string(r.Value), part: r.Partition, off: r.Offset})
	c.seen[string(r.Value)]++
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *collector) snapshot() ([]rec, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		seen[k] = v
	}
	return append([]rec(nil), c.got...), seen
}

// waitDistinct waits until n distinct values have arrived.
func (c *collector) waitDistinct(ctx context.Context, t testing.TB, n int) {
	t.Helper()
	for c.distinct() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out with %d of %d records delivered", c.distinct(), n)
		case <-c.wake:
		}
	}
}

// consumer runs Consume in the background; stop cancels it and returns its
// error.
type consumer struct {
	cancel context.CancelFunc
	done   chan error
}

func startConsumer(ctx context.Context, l eventlog.Log, group, topic string, h eventlog.Handler) *consumer {
	ctx, cancel := context.WithCancel(ctx)
	c := &consumer{cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- l.Consume(ctx, group, []string{topic}, h) }()
	return c
}

func (c *consumer) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("Consume returned %v after cancel, want nil", err)
		}
	case <-time.After(Timeout):
		t.Fatalf("Consume did not return after cancel")
	}
}

func testOrderPerKey(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic := Name(t, "t")
	const parts = 4
	if err := l.EnsureTopic(ctx, topic, parts); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	want := appendN(ctx, t, l, topic, 10, 50, 1, "a:")
	want = append(want, appendN(ctx, t, l, topic, 10, 150, 37, "b:")...)

	col := newCollector()
	c := startConsumer(ctx, l, Name(t, "g"), topic, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		col.add(r)
		return nil
	}))
	col.waitDistinct(ctx, t, len(want))
	c.stop(t)

	got, seen := col.snapshot()
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %q delivered %d times in one clean run", v, n)
		}
	}
	byKey := map[string][]string{}
	for _, r := range want {
		byKey[r.key] = append(byKey[r.key], r.value)
	}
	gotByKey := map[string][]string{}
	nextOff := map[int32]int64{}
	for _, r := range got {
		gotByKey[r.key] = append(gotByKey[r.key], r.value)
		if p := eventlog.PartitionFor([]byte(r.key), parts); r.part != p {
			t.Errorf("key %s in partition %d, want %d (FNV-1a)", r.key, r.part, p)
		}
		if r.off != nextOff[r.part] {
			t.Errorf("partition %d: offset %d delivered, want %d (dense, in order)", r.part, r.off, nextOff[r.part])
		}
		nextOff[r.part] = r.off + 1
	}
	for k, vs := range byKey {
		if fmt.Sprint(gotByKey[k]) != fmt.Sprint(vs) {
			t.Errorf("key %s delivered out of order:\n got %v\nwant %v", k, gotByKey[k], vs)
		}
	}
}

// claimRecorder is a Handler that records each generation's claims and
// processes records with fn, marking each.
type claimRecorder struct {
	mu     sync.Mutex
	gens   map[int64]map[string][]int32 // generation -> member -> partitions
	member string
	wake   chan struct{}
	fn     func(eventlog.Record)
}

func newClaimRecorder(fn func(eventlog.Record)) *claimRecorder {
	return &claimRecorder{gens: map[int64]map[string][]int32{}, wake: make(chan struct{}, 1), fn: fn}
}

func (h *claimRecorder) Setup(_ context.Context, s eventlog.Session) error {
	h.mu.Lock()
	if h.gens[s.Generation()] == nil {
		h.gens[s.Generation()] = map[string][]int32{}
	}
	var ps []int32
	for _, p := range s.Claims() {
		ps = append(ps, p...)
	}
	h.gens[s.Generation()][s.MemberID()] = ps
	h.member = s.MemberID()
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return nil
}

func (h *claimRecorder) Cleanup(context.Context, eventlog.Session) error { return nil }

func (h *claimRecorder) ConsumeClaim(_ context.Context, s eventlog.Session, c eventlog.Claim) error {
	for r := range c.Records() {
		if h.fn != nil {
			h.fn(r)
		}
		s.Mark(r.Topic, r.Partition, r.Offset+1)
	}
	return nil
}

func (h *claimRecorder) latest() (int64, []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var g int64 = -1 << 62
	for gen := range h.gens {
		g = max(g, gen)
	}
	return g, h.gens[g][h.member]
}

func testPartitionCount(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic := Name(t, "t")
	if err := l.EnsureTopic(ctx, topic, 3); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	if err := l.EnsureTopic(ctx, topic, 3); err != nil {
		t.Fatalf("EnsureTopic on an existing topic: %v", err)
	}
	h := newClaimRecorder(nil)
	c := startConsumer(ctx, l, Name(t, "g"), topic, h)
	defer c.stop(t)
	for {
		if _, ps := h.latest(); len(ps) > 0 {
			if len(ps) != 3 {
				t.Fatalf("lone member claims %v, want all 3 partitions", ps)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no generation started")
		case <-h.wake:
		}
	}
}

func testResumeFromCommitted(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic, group := Name(t, "t"), Name(t, "g")
	if err := l.EnsureTopic(ctx, topic, 4); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	all := appendN(ctx, t, l, topic, 8, 100, 10, "")

	// First run: process (and mark) records until 40 arrived, then stop.
	first := newCollector()
	cctx, cancel := context.WithCancel(ctx)
	var n atomic.Int64
	err := l.Consume(cctx, group, []string{topic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		first.add(r)
		if n.Add(1) == 40 {
			cancel()
		}
		return nil
	}))
	cancel()
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	_, processed := first.snapshot()
	if len(processed) < 40 {
		t.Fatalf("first run processed %d records, want >= 40", len(processed))
	}

	// Second run, possibly on a fresh client: exactly the rest arrives.
	l2 := newLog(t)
	more := appendN(ctx, t, l2, topic, 8, 20, 5, "more:")
	second := newCollector()
	c := startConsumer(ctx, l2, group, topic, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		second.add(r)
		return nil
	}))
	second.waitDistinct(ctx, t, len(all)+len(more)-len(processed))
	c.stop(t)
	_, got := second.snapshot()
	for v := range got {
		if processed[v] > 0 {
			t.Errorf("record %q was processed and committed, yet delivered again", v)
		}
	}
	for _, r := range append(all, more...) {
		if processed[r.value] == 0 && got[r.value] == 0 {
			t.Errorf("record %q never delivered", r.value)
		}
	}
}

// noMark processes records without marking them.
type noMark struct{ col *collector }

func (noMark) Setup(context.Context, eventlog.Session) error   { return nil }
func (noMark) Cleanup(context.Context, eventlog.Session) error { return nil }
func (h noMark) ConsumeClaim(_ context.Context, _ eventlog.Session, c eventlog.Claim) error {
	for r := range c.Records() {
		h.col.add(r)
	}
	return nil
}

func testUncommittedRedelivered(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic, group := Name(t, "t"), Name(t, "g")
	if err := l.EnsureTopic(ctx, topic, 2); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	all := appendN(ctx, t, l, topic, 4, 30, 30, "")
	for run := 0; run < 2; run++ {
		col := newCollector()
		c := startConsumer(ctx, l, group, topic, noMark{col})
		col.waitDistinct(ctx, t, len(all))
		c.stop(t)
	}
}

func testIndependentGroups(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic := Name(t, "t")
	if err := l.EnsureTopic(ctx, topic, 2); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	all := appendN(ctx, t, l, topic, 4, 40, 8, "")
	var cols []*collector
	var cs []*consumer
	for i := 0; i < 2; i++ {
		col := newCollector()
		cols = append(cols, col)
		cs = append(cs, startConsumer(ctx, l, Name(t, fmt.Sprintf("g%d", i)), topic, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
			col.add(r)
			return nil
		})))
	}
	for i, col := range cols {
		col.waitDistinct(ctx, t, len(all))
		cs[i].stop(t)
	}
}

func testRebalance(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	la, lb := newLog(t), newLog(t)
	topic, group := Name(t, "t"), Name(t, "g")
	const parts = 6
	if err := la.EnsureTopic(ctx, topic, parts); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	col := newCollector()
	add := func(r eventlog.Record) { col.add(r) }
	ha, hb := newClaimRecorder(add), newClaimRecorder(add)

	waitClaims := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-ctx.Done():
				ga, pa := ha.latest()
				gb, pb := hb.latest()
				t.Fatalf("%s: timed out; A gen %d %v, B gen %d %v", what, ga, pa, gb, pb)
			case <-ha.wake:
			case <-hb.wake:
			}
		}
	}

	a := startConsumer(ctx, la, group, topic, ha)
	waitClaims("A alone", func() bool { _, ps := ha.latest(); return len(ps) == parts })
	first := appendN(ctx, t, la, topic, 12, 60, 6, "1:")
	col.waitDistinct(ctx, t, len(first))

	b := startConsumer(ctx, lb, group, topic, hb)
	waitClaims("A and B split", func() bool {
		ga, pa := ha.latest()
		gb, pb := hb.latest()
		if ga != gb || len(pa) == 0 || len(pb) == 0 {
			return false
		}
		owned := map[int32]int{}
		for _, p := range append(append([]int32(nil), pa...), pb...) {
			owned[p]++
		}
		for p := int32(0); p < parts; p++ {
			if owned[p] != 1 {
				return false
			}
		}
		return len(owned) == parts
	})
	second := appendN(ctx, t, lb, topic, 12, 60, 6, "2:")
	col.waitDistinct(ctx, t, len(first)+len(second))

	b.stop(t)
	waitClaims("A alone again", func() bool {
		ga, pa := ha.latest()
		gb, _ := hb.latest()
		return ga > gb && len(pa) == parts
	})
	third := appendN(ctx, t, la, topic, 12, 60, 6, "3:")
	col.waitDistinct(ctx, t, len(first)+len(second)+len(third))
	a.stop(t)

	_, seen := col.snapshot()
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %q delivered %d times across clean rebalances, want once", v, n)
		}
	}
}

func testHandlerError(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic, group := Name(t, "t"), Name(t, "g")
	if err := l.EnsureTopic(ctx, topic, 1); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	appendN(ctx, t, l, topic, 1, 10, 10, "")
	boom := errors.New("boom")
	var calls atomic.Int64
	err := l.Consume(ctx, group, []string{topic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		calls.Add(1)
		if r.Offset == 5 {
			return boom
		}
		return nil
	}))
	if !errors.Is(err, boom) {
		t.Fatalf("Consume returned %v, want the handler's error", err)
	}
	col := newCollector()
	c := startConsumer(ctx, l, group, topic, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		col.add(r)
		return nil
	}))
	col.waitDistinct(ctx, t, 5)
	c.stop(t)
	got, _ := col.snapshot()
	if got[0].off != 5 {
		t.Fatalf("after a handler error the partition resumed at offset %d, want 5 (the failed record)", got[0].off)
	}
}

// testInspector checks the optional Inspector: End counts what was
// appended per partition, Committed reports what a group committed.
func testInspector(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	in, ok := l.(eventlog.Inspector)
	if !ok {
		t.Skipf("%T does not implement the optional eventlog.Inspector", l)
	}
	topic, group := Name(t, "t"), Name(t, "g")
	const parts = 3
	if err := l.EnsureTopic(ctx, topic, parts); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	all := appendN(ctx, t, l, topic, 9, 45, 9, "")
	want := make([]int64, parts)
	for _, r := range all {
		want[eventlog.PartitionFor([]byte(r.key), parts)]++
	}
	end, err := in.End(ctx, topic)
	if err != nil {
		t.Fatalf("End: %v", err)
	}
	if fmt.Sprint(end) != fmt.Sprint(want) {
		t.Fatalf("End = %v, want %v", end, want)
	}
	if c, err := in.Committed(ctx, group, topic); err != nil || len(c) != 0 {
		t.Fatalf("Committed of a new group = %v, %v; want empty", c, err)
	}
	col := newCollector()
	c := startConsumer(ctx, l, group, topic, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		col.add(r)
		return nil
	}))
	col.waitDistinct(ctx, t, len(all))
	c.stop(t)
	got, err := in.Committed(ctx, group, topic)
	if err != nil {
		t.Fatalf("Committed: %v", err)
	}
	for p, e := range want {
		if got[int32(p)] != e {
			t.Fatalf("Committed = %v after consuming everything, want %v", got, want)
		}
	}
}

func testClose(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	topic := Name(t, "t")
	if err := l.EnsureTopic(ctx, topic, 1); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	h := newClaimRecorder(nil)
	done := make(chan error, 1)
	go func() { done <- l.Consume(ctx, Name(t, "g"), []string{topic}, h) }()
	for {
		if _, ps := h.latest(); len(ps) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no generation started")
		case <-h.wake:
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Fatalf("Consume after Close returned %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Consume did not return after Close")
	}
	if err := l.Append(ctx, eventlog.Record{Topic: topic, Value: []byte("x")}); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Append after Close returned %v, want ErrClosed", err)
	}
}
