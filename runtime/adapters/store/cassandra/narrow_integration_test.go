//go:build integration

package cassandra_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// fakeClock is a settable clock for the narrower.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func idAt(t time.Time, lo uint64) snowflake.ID {
	return snowflake.FromTime(t) | snowflake.ID(lo&(1<<22-1))
}

func ids(ms []store.Message) []snowflake.ID {
	out := make([]snowflake.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// TestBucketNarrowing: a channel narrowed from 10 days to 1 hour keeps its
// old rows where they were, its bucket numbers keep growing with ids, and
// every history read crosses the change seamlessly.
func TestBucketNarrowing(t *testing.T) {
	addr := server(t)
	cfg := testConfig(addr, sharedKeyspace(t, addr))
	cfg.WidthCacheTTL = 50 * time.Millisecond
	cfg.Narrowing.Disabled = true
	s := newTestStore(t, cfg)
	defer s.Close()
	ctx := context.Background()
	ch := snowflake.ID(time.Now().UnixNano())

	// Ten messages a day apart before the change (old width), then ten
	// 20 minutes apart after it (new width).
	from := s.NarrowFrom(time.Now())
	var all []snowflake.ID
	for i := 10; i >= 1; i-- {
		all = append(all, idAt(from.Time().Add(-time.Duration(i)*24*time.Hour), 1))
	}
	for i := range 10 {
		all = append(all, idAt(from.Time().Add(time.Duration(i)*20*time.Minute), 2))
	}
	for _, id := range all[:10] {
		if err := s.PutMessage(ctx, store.Message{ID: id, ChannelID: ch, Content: "old"}); err != nil {
			t.Fatal(err)
		}
	}
	oldBuckets, err := s.Buckets(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetBucketWidth(ctx, ch, from, time.Hour, "test"); err != nil {
		t.Fatalf("SetBucketWidth: %v", err)
	}
	// Widening, or a change that does not move forward, is refused.
	if err := s.SetBucketWidth(ctx, ch, s.NarrowFrom(time.Now().Add(time.Hour)), 2*time.Hour, "test"); err == nil {
		t.Fatal("widening accepted")
	}
	for _, id := range all[10:] {
		if err := s.PutMessage(ctx, store.Message{ID: id, ChannelID: ch, Content: "new"}); err != nil {
			t.Fatal(err)
		}
	}
	if w, _ := s.BucketWidth(ctx, ch, all[9]); w != store.DefaultBucketWidth {
		t.Fatalf("width before the change: %v", w)
	}
	if w, _ := s.BucketWidth(ctx, ch, all[10]); w != time.Hour {
		t.Fatalf("width after the change: %v", w)
	}
	buckets, err := s.Buckets(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, id := range all {
		w := store.DefaultBucketWidth
		if id >= from {
			w = time.Hour
		}
		if b := store.Bucket(id, w); !slices.Contains(want, b) {
			want = append(want, b)
		}
	}
	slices.Reverse(want)
	if !slices.Equal(buckets, want) {
		t.Fatalf("Buckets:\n got %v\nwant %v", buckets, want)
	}
	if !slices.Equal(buckets[len(buckets)-len(oldBuckets):], oldBuckets) {
		t.Fatalf("old buckets moved: %v, were %v", buckets, oldBuckets)
	}
	// Old rows are still readable where they were.
	for _, id := range all {
		if _, err := s.GetMessage(ctx, ch, id); err != nil {
			t.Fatalf("GetMessage %v: %v", id, err)
		}
	}
	newestFirst := slices.Clone(all)
	slices.Reverse(newestFirst)
	// Scroll back by 3 across the change.
	var got []snowflake.ID
	var before snowflake.ID
	for {
		page, err := s.ListMessages(ctx, ch, store.HistoryQuery{Before: before, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, ids(page)...)
		before = page[len(page)-1].ID
	}
	if !slices.Equal(got, newestFirst) {
		t.Fatalf("scroll back:\n got %v\nwant %v", got, newestFirst)
	}
	page, err := s.ListMessages(ctx, ch, store.HistoryQuery{After: all[8], Limit: 3})
	if err != nil || !slices.Equal(ids(page), []snowflake.ID{all[11], all[10], all[9]}) {
		t.Fatalf("after across the change: %v %v", ids(page), err)
	}
	page, err = s.ListMessages(ctx, ch, store.HistoryQuery{Around: all[10], Limit: 5})
	if err != nil || !slices.Equal(ids(page), []snowflake.ID{all[12], all[11], all[10], all[9], all[8]}) {
		t.Fatalf("around the change: %v %v", ids(page), err)
	}
	// The reads above were counted per partition.
	if hot := s.HotPartitions(3); len(hot) == 0 || hot[0].ChannelID != ch || hot[0].Reads == 0 {
		t.Fatalf("HotPartitions: %+v", hot)
	}
	// Bulk delete across the change empties buckets on both sides.
	if err := s.DeleteMessages(ctx, ch, all[8:12]); err != nil {
		t.Fatal(err)
	}
	page, err = s.ListMessages(ctx, ch, store.HistoryQuery{Before: all[12], Limit: 2})
	if err != nil || !slices.Equal(ids(page), []snowflake.ID{all[7], all[6]}) {
		t.Fatalf("after deleting across the change: %v %v", ids(page), err)
	}
}

// TestAutomaticNarrowing: the seed's busy channel (20 msg/s of ~300 bytes)
// gets a 1-hour width from the next message ids on, automatically.
func TestAutomaticNarrowing(t *testing.T) {
	addr := server(t)
	cfg := testConfig(addr, sharedKeyspace(t, addr))
	cfg.WidthCacheTTL = 50 * time.Millisecond
	clock := &fakeClock{t: time.Now()}
	cfg.Narrowing.Now = clock.Now
	cfg.Narrowing.Window = time.Minute
	s := newTestStore(t, cfg)
	defer s.Close()
	ctx := context.Background()
	busy, quiet := snowflake.ID(time.Now().UnixNano()), snowflake.ID(time.Now().UnixNano()+1)
	content := string(make([]byte, 230)) // ~300 bytes with the row's other fields

	// One minute of traffic at 20 msg/s on the busy channel (1,200
	// writes), two messages a minute on a typical one (~9 MB per 10-day
	// bucket); the fake clock moves 50ms per busy message.
	start := clock.Now()
	for i := range 1201 {
		id := idAt(start.Add(-time.Hour), uint64(i))
		if err := s.PutMessage(ctx, store.Message{ID: id, ChannelID: busy, Content: content}); err != nil {
			t.Fatal(err)
		}
		if i%1200 == 0 {
			if err := s.PutMessage(ctx, store.Message{ID: id, ChannelID: quiet, Content: content}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Add(50 * time.Millisecond)
	}
	future := s.NarrowFrom(time.Now()) + 1<<22*1000*3600
	if w, err := s.BucketWidth(ctx, busy, future); err != nil || w != time.Hour {
		t.Fatalf("busy channel width = %v, %v; want 1h", w, err)
	}
	if w, err := s.BucketWidth(ctx, quiet, future); err != nil || w != store.DefaultBucketWidth {
		t.Fatalf("quiet channel width = %v, %v; want the default", w, err)
	}
	// Messages written so far keep the old width.
	if w, _ := s.BucketWidth(ctx, busy, idAt(start, 0)); w != store.DefaultBucketWidth {
		t.Fatalf("width of existing ids changed to %v", w)
	}
}
