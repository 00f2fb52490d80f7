package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

const channel = snowflake.ID(7) // event() uses channel 7

func openStore(t *testing.T, dir string) *pebble.Store {
	t.Helper()
	st, err := pebble.New(pebble.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// commit writes message id with its MESSAGE_CREATE event in one store
// write, as the API does.
func commit(t *testing.T, st store.MessageEvents, id uint64) {
	t.Helper()
	r, err := event(id).Record()
	if err != nil {
		t.Fatal(err)
	}
	m := store.Message{ID: snowflake.ID(id), ChannelID: channel, GuildID: 1, AuthorID: 3, Content: "m"}
	if err := st.PutMessageEvents(context.Background(), m, store.Event{Topic: r.Topic, Key: r.Key, Value: r.Value}); err != nil {
		t.Fatal(err)
	}
}

func pendingRows(t *testing.T, st store.Outbox) int {
	t.Helper()
	es, err := st.ListOutbox(context.Background(), store.OutboxShard(channel), 10000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func flush(t *testing.T, ob *outbox.Outbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ob.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func wantIDs(t *testing.T, got []snowflake.ID, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("log holds %d records %v, want %d", len(got), got, n)
	}
	for i, id := range got {
		if id != snowflake.ID(i+1) {
			t.Fatalf("log holds %v, want 1..%d in order", got, n)
		}
	}
}

// TestStoreRelayDeletesOnlyAfterAck: while the log does not answer the
// rows stay in the store; once it acknowledges they are appended in write
// order and deleted.
func TestStoreRelayDeletesOnlyAfterAck(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	gl := newGated(ml)
	ob, err := outbox.New(outbox.Config{PublishTimeout: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}, gl)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	if !ob.RelayStore(st) || !ob.RelaysStore(st) {
		t.Fatal("RelayStore refused the first store")
	}
	for i := uint64(1); i <= 3; i++ {
		commit(t, st, i)
		ob.Committed(store.OutboxShard(channel))
	}
	// Two attempts: the first timed out, the second is a retry; the rows
	// are still there.
	for range 2 {
		select {
		case <-gl.attempt:
		case <-time.After(30 * time.Second):
			t.Fatal("the relay never tried the log")
		}
	}
	if n := pendingRows(t, st); n != 3 {
		t.Fatalf("%d rows in the store's outbox while the log is down, want 3", n)
	}
	gl.release()
	flush(t, ob)
	if n := pendingRows(t, st); n != 0 {
		t.Fatalf("%d rows left after the log acknowledged, want 0", n)
	}
	wantIDs(t, readAll(t, ml, 3), 3)
}

// countingLog records the size of every Append and fails the first
// failFirst of them.
type countingLog struct {
	eventlog.Log
	mu        sync.Mutex
	sizes     []int
	failFirst int
}

func (c *countingLog) Append(ctx context.Context, rs ...eventlog.Record) error {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(rs))
	fail := len(c.sizes) <= c.failFirst
	c.mu.Unlock()
	if fail {
		return eventlog.ErrUnavailable
	}
	return c.Log.Append(ctx, rs...)
}

// TestStoreRelayBatches: rows are appended at most BatchSize per call,
// every row once and in order.
func TestStoreRelayBatches(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	for i := uint64(1); i <= 10; i++ {
		commit(t, st, i)
	}
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	cl := &countingLog{Log: ml}
	ob, err := outbox.New(outbox.Config{BatchSize: 4}, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.RelayStore(st)
	flush(t, ob)
	cl.mu.Lock()
	sizes := append([]int(nil), cl.sizes...)
	cl.mu.Unlock()
	total := 0
	for _, n := range sizes {
		if n > 4 {
			t.Fatalf("an append of %d records, BatchSize is 4 (%v)", n, sizes)
		}
		total += n
	}
	if total != 10 || len(sizes) != 3 {
		t.Fatalf("appends %v, want 4+4+2", sizes)
	}
	wantIDs(t, readAll(t, ml, 10), 10)
}

// TestStoreRelayRetriesFailedAppends: failed appends are retried with
// backoff until the log takes the rows; nothing is lost or doubled.
func TestStoreRelayRetriesFailedAppends(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	cl := &countingLog{Log: ml, failFirst: 3}
	ob, err := outbox.New(outbox.Config{MaxBackoff: 20 * time.Millisecond}, cl)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.RelayStore(st)
	for i := uint64(1); i <= 4; i++ {
		commit(t, st, i)
		ob.Committed(store.OutboxShard(channel))
	}
	flush(t, ob)
	cl.mu.Lock()
	attempts := len(cl.sizes)
	cl.mu.Unlock()
	if attempts < 4 {
		t.Fatalf("%d appends; 3 failed, so at least 4 were needed", attempts)
	}
	if n := pendingRows(t, st); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	got := readAll(t, ml, 4)
	wantIDs(t, got, 4)
	ends, err := ml.End(context.Background(), eventlog.MessagesTopic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if sum != 4 {
		t.Fatalf("the log holds %d records after the retries, want 4", sum)
	}
}

// TestStoreRelayNoLossAcrossRestarts: rows committed by a process that
// died before relaying are relayed by the next process on the same store
// at start, and once relayed are not relayed again by the one after.
func TestStoreRelayNoLossAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	for i := uint64(1); i <= 3; i++ {
		commit(t, st, i)
	}
	// The writer dies before any relay ran.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	for life := range 2 {
		st := openStore(t, dir)
		ob, err := outbox.New(outbox.Config{}, ml)
		if err != nil {
			t.Fatal(err)
		}
		ob.RelayStore(st)
		flush(t, ob)
		ob.Close()
		if n := pendingRows(t, st); n != 0 {
			t.Fatalf("life %d: %d rows left", life, n)
		}
		st.Close()
	}
	ends, err := ml.End(context.Background(), eventlog.MessagesTopic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if sum != 3 {
		t.Fatalf("the log holds %d records after two restarts, want 3", sum)
	}
	wantIDs(t, readAll(t, ml, 3), 3)
}

// TestStoreRelaySweepsOtherWritersRows: rows another process committed
// (and never relayed: it died) are relayed by the sweep once older than
// SweepAge, without this process having written them.
func TestStoreRelaySweepsOtherWritersRows(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	ob, err := outbox.New(outbox.Config{SweepAge: time.Millisecond, SweepEvery: 20 * time.Millisecond}, ml)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.RelayStore(st)
	flush(t, ob) // the start-up pass is over
	for i := uint64(1); i <= 2; i++ {
		commit(t, st, i) // no Committed: another process wrote these
	}
	wantIDs(t, readAll(t, ml, 2), 2)
}

// TestRelayStoreFirstStoreWins: an Outbox relays one store; a writer on
// another store must not commit events there (nothing would relay them).
func TestRelayStoreFirstStoreWins(t *testing.T) {
	a, b := openStore(t, t.TempDir()), openStore(t, t.TempDir())
	defer a.Close()
	defer b.Close()
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	ob, err := outbox.New(outbox.Config{}, ml)
	if err != nil {
		t.Fatal(err)
	}
	if ob.RelaysStore(a) {
		t.Fatal("RelaysStore before RelayStore")
	}
	if !ob.RelayStore(a) {
		t.Fatal("RelayStore refused the first store")
	}
	if !ob.RelayStore(a) {
		t.Fatal("RelayStore of the same store again refused")
	}
	if ob.RelayStore(b) || ob.RelaysStore(b) || !ob.RelaysStore(a) {
		t.Fatal("a second store was accepted")
	}
	ob.Close()
	if ob.RelaysStore(a) {
		t.Fatal("RelaysStore after Close: writes would commit events nobody relays")
	}
	if err := ob.Publish(context.Background(), event(1)); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("Publish after Close = %v", err)
	}
}

// windowRecorder is a store whose outbox listings record the window they
// were asked for.
type windowRecorder struct {
	*pebble.Store
	mu    sync.Mutex
	froms []time.Time // the from of each ListOutboxRange
}

func (w *windowRecorder) ListOutboxRange(ctx context.Context, shard, limit int, from, to time.Time) ([]store.OutboxEntry, error) {
	w.mu.Lock()
	w.froms = append(w.froms, from)
	w.mu.Unlock()
	return w.Store.ListOutboxRange(ctx, shard, limit, from, to)
}

// since returns the froms recorded from index i on.
func (w *windowRecorder) since(i int) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.froms[i:]...)
}

// TestStoreRelayReadsAfterWhatItDeleted: the start-up pass reads every
// shard from the head; after it, a relay pass and a sweep start shortly
// before the last complete one (not at the head, where the store keeps
// the deleted entries as tombstones) and still relay every new entry,
// its own (Committed) and another writer's (the sweep).
func TestStoreRelayReadsAfterWhatItDeleted(t *testing.T) {
	st := &windowRecorder{Store: openStore(t, t.TempDir())}
	defer st.Close()
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	ob, err := outbox.New(outbox.Config{SweepAge: time.Millisecond, SweepEvery: 20 * time.Millisecond}, ml)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.RelayStore(st)
	flush(t, ob) // the start-up pass: every shard from the head
	for i, from := range st.since(0)[:store.OutboxShards] {
		if !from.IsZero() {
			t.Fatalf("start-up read %d began at %v, want the head", i, from)
		}
	}
	// Sweeps run meanwhile; once every shard was swept from the head, a
	// later read starts within a window.
	mark := len(st.since(0))
	commit(t, st, 1)
	ob.Committed(store.OutboxShard(channel))
	wantIDs(t, readAll(t, ml, 1), 1)
	commit(t, st, 2) // another writer's: no Committed, the sweep finds it
	wantIDs(t, readAll(t, ml, 2), 2)
	windowed := 0
	for _, from := range st.since(mark) {
		if !from.IsZero() {
			windowed++
			if time.Since(from) > time.Minute {
				t.Fatalf("a read began at %v, a minute before now: it walks what was deleted", from)
			}
		}
	}
	if windowed == 0 {
		t.Fatal("every read after the start-up pass began at the head")
	}
}
