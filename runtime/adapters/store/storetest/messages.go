package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func testMessages(t *testing.T, s store.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch, g := rid(), rid()
		m := fullMessage(ch, g, idAt(base, 7))
		noErr(t, "PutMessage", s.PutMessage(ctx, m))
		got, err := s.GetMessage(ctx, ch, m.ID)
		noErr(t, "GetMessage", err)
		equal(t, "GetMessage", got, m)

		// A minimal message keeps its zero values.
		z := store.Message{ID: idAt(base, 8), ChannelID: ch}
		noErr(t, "PutMessage", s.PutMessage(ctx, z))
		got, err = s.GetMessage(ctx, ch, z.ID)
		noErr(t, "GetMessage", err)
		equal(t, "GetMessage zero", got, z)
		if !got.EditedAt.IsZero() {
			t.Fatalf("EditedAt of a never edited message: %v", got.EditedAt)
		}

		page, err := s.ListMessages(ctx, ch, store.HistoryQuery{})
		noErr(t, "ListMessages", err)
		equal(t, "ListMessages", page, []store.Message{z, m})
	})

	t.Run("Edit", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch := rid()
		m := fullMessage(ch, 0, idAt(base, 1))
		noErr(t, "PutMessage", s.PutMessage(ctx, m))
		m.Content = "edited"
		m.EditedAt = ms(time.Now().Add(time.Minute))
		m.Mentions = nil
		m.Attachments = m.Attachments[:1]
		m.Embeds, m.Components = "", `[]`
		noErr(t, "PutMessage (edit)", s.PutMessage(ctx, m))
		got, err := s.GetMessage(ctx, ch, m.ID)
		noErr(t, "GetMessage", err)
		equal(t, "edited message", got, m)
		equalIDs(t, "history after edit", mustList(t, s, ch, store.HistoryQuery{}), []snowflake.ID{m.ID})
		if b := mustBuckets(t, s, ch); !slices.Equal(b, []int64{bucketOf(m.ID)}) {
			t.Fatalf("Buckets after edit: %v", b)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch, other := rid(), rid()
		ids := []snowflake.ID{idAt(base, 1), idAt(base, 2), idAt(base, 3)}
		putAll(t, s, ch, ids)
		putAll(t, s, other, ids[1:2])
		noErr(t, "DeleteMessage", s.DeleteMessage(ctx, ch, ids[1]))
		_, err := s.GetMessage(ctx, ch, ids[1])
		wantErr(t, "GetMessage deleted", err, store.ErrNotFound)
		wantErr(t, "DeleteMessage again", s.DeleteMessage(ctx, ch, ids[1]), store.ErrNotFound)
		equalIDs(t, "history", mustList(t, s, ch, store.HistoryQuery{}), pick(ids, 2, 0))
		// The same id in another channel is another message.
		_, err = s.GetMessage(ctx, other, ids[1])
		noErr(t, "GetMessage other channel", err)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch := rid()
		_, err := s.GetMessage(ctx, ch, idAt(base, 1))
		wantErr(t, "GetMessage unknown channel", err, store.ErrNotFound)
		putAll(t, s, ch, []snowflake.ID{idAt(base, 1)})
		_, err = s.GetMessage(ctx, ch, idAt(base, 2))
		wantErr(t, "GetMessage unknown id", err, store.ErrNotFound)
		_, err = s.GetMessage(ctx, ch, idAt(base.Add(-365*24*time.Hour), 1))
		wantErr(t, "GetMessage unknown id in an empty bucket", err, store.ErrNotFound)
		wantErr(t, "DeleteMessage unknown", s.DeleteMessage(ctx, ch, idAt(base, 3)), store.ErrNotFound)

		empty := rid()
		equalIDs(t, "history of an unknown channel", mustList(t, s, empty, store.HistoryQuery{}), nil)
		equalIDs(t, "around in an unknown channel", mustList(t, s, empty, store.HistoryQuery{Around: idAt(base, 1)}), nil)
		if b := mustBuckets(t, s, empty); len(b) != 0 {
			t.Fatalf("Buckets of an unknown channel: %v", b)
		}
	})

	t.Run("Paging", func(t *testing.T) { t.Parallel(); testPaging(t, s) })
	t.Run("BucketBoundary", func(t *testing.T) { t.Parallel(); testBucketBoundary(t, s) })
	t.Run("SparseHistory", func(t *testing.T) { t.Parallel(); testSparse(t, s) })
	t.Run("BulkDelete", func(t *testing.T) { t.Parallel(); testBulkDelete(t, s) })
	t.Run("TimeCursors", func(t *testing.T) { t.Parallel(); testTimeCursors(t, s) })
	t.Run("ConcurrentWriters", func(t *testing.T) { t.Parallel(); testConcurrent(t, s) })
}

type historyCase struct {
	name string
	q    store.HistoryQuery
	want []snowflake.ID
}

func runCases(t *testing.T, s store.Store, ch snowflake.ID, cases []historyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			equalIDs(t, fmt.Sprintf("ListMessages(%+v)", c.q), mustList(t, s, ch, c.q), c.want)
		})
	}
}

// testPaging: 120 messages a minute apart. Index i is the i-th oldest.
func testPaging(t *testing.T, s store.Store) {
	ch := rid()
	const n = 120
	ids := make([]snowflake.ID, n)
	for i := range ids {
		ids[i] = idAt(base.Add(time.Duration(i)*time.Minute), uint64(i+1))
	}
	putAll(t, s, ch, ids)
	gap := ids[60] + 1 // between ids[60] and ids[61], no message
	newest, oldest := ids[n-1], ids[0]

	runCases(t, s, ch, []historyCase{
		// Limits: 0 means 50, the rest is clamped to 1..100.
		{"default limit", store.HistoryQuery{}, span(ids, n-1, n-50)},
		{"limit 1", store.HistoryQuery{Limit: 1}, span(ids, n-1, n-1)},
		{"limit 7", store.HistoryQuery{Limit: 7}, span(ids, n-1, n-7)},
		{"limit 100", store.HistoryQuery{Limit: 100}, span(ids, n-1, n-100)},
		{"limit 101 clamps", store.HistoryQuery{Limit: 101}, span(ids, n-1, n-100)},
		{"limit 100000 clamps", store.HistoryQuery{Limit: 100000}, span(ids, n-1, n-100)},
		{"negative limit clamps to 1", store.HistoryQuery{Limit: -5}, span(ids, n-1, n-1)},

		// Before: exclusive, the messages right before the cursor.
		{"before middle", store.HistoryQuery{Before: ids[60], Limit: 10}, span(ids, 59, 50)},
		{"before gap", store.HistoryQuery{Before: gap, Limit: 3}, span(ids, 60, 58)},
		{"before newest", store.HistoryQuery{Before: newest, Limit: 2}, span(ids, n-2, n-3)},
		{"before past newest", store.HistoryQuery{Before: newest + 1, Limit: 2}, span(ids, n-1, n-2)},
		{"before second", store.HistoryQuery{Before: ids[1]}, span(ids, 0, 0)},
		{"before oldest", store.HistoryQuery{Before: oldest}, nil},
		{"before 1", store.HistoryQuery{Before: 1}, nil},
		{"before default limit", store.HistoryQuery{Before: ids[100]}, span(ids, 99, 50)},
		{"before short page", store.HistoryQuery{Before: ids[5], Limit: 50}, span(ids, 4, 0)},

		// After: exclusive, the messages right after the cursor, newest first.
		{"after middle", store.HistoryQuery{After: ids[60], Limit: 10}, span(ids, 70, 61)},
		{"after gap", store.HistoryQuery{After: gap, Limit: 3}, span(ids, 63, 61)},
		{"after oldest", store.HistoryQuery{After: oldest, Limit: 2}, span(ids, 2, 1)},
		{"after before oldest", store.HistoryQuery{After: oldest - 1, Limit: 3}, span(ids, 2, 0)},
		{"after 1", store.HistoryQuery{After: 1, Limit: 4}, span(ids, 3, 0)},
		{"after second newest", store.HistoryQuery{After: ids[n-2]}, span(ids, n-1, n-1)},
		{"after newest", store.HistoryQuery{After: newest}, nil},
		{"after default limit", store.HistoryQuery{After: ids[9]}, span(ids, 59, 10)},
		{"after short page", store.HistoryQuery{After: ids[n-6], Limit: 50}, span(ids, n-1, n-5)},
		{"after clamps", store.HistoryQuery{After: oldest - 1, Limit: 500}, span(ids, 99, 0)},

		// Around: the message itself when it exists; of the remaining
		// slots half (rounded down) newer, the rest older; a side short of
		// messages gives its slots to the other.
		{"around existing even", store.HistoryQuery{Around: ids[60], Limit: 10}, span(ids, 64, 55)},
		{"around existing odd", store.HistoryQuery{Around: ids[60], Limit: 11}, span(ids, 65, 55)},
		{"around existing 1", store.HistoryQuery{Around: ids[60], Limit: 1}, span(ids, 60, 60)},
		{"around existing 2", store.HistoryQuery{Around: ids[60], Limit: 2}, span(ids, 60, 59)},
		{"around existing 3", store.HistoryQuery{Around: ids[60], Limit: 3}, span(ids, 61, 59)},
		{"around gap", store.HistoryQuery{Around: gap, Limit: 10}, span(ids, 65, 56)},
		{"around gap 1", store.HistoryQuery{Around: gap, Limit: 1}, span(ids, 60, 60)},
		{"around gap 3", store.HistoryQuery{Around: gap, Limit: 3}, span(ids, 61, 59)},
		{"around default limit", store.HistoryQuery{Around: ids[60]}, span(ids, 84, 35)},
		{"around clamps", store.HistoryQuery{Around: ids[60], Limit: 1000}, span(ids, 109, 10)},
		// Around at the edges.
		{"around newest", store.HistoryQuery{Around: newest, Limit: 10}, span(ids, n-1, n-10)},
		{"around second newest", store.HistoryQuery{Around: ids[n-2], Limit: 10}, span(ids, n-1, n-10)},
		{"around oldest", store.HistoryQuery{Around: oldest, Limit: 10}, span(ids, 9, 0)},
		{"around second", store.HistoryQuery{Around: ids[1], Limit: 10}, span(ids, 9, 0)},
		{"around past newest", store.HistoryQuery{Around: newest + 1000, Limit: 4}, span(ids, n-1, n-4)},
		{"around before oldest", store.HistoryQuery{Around: oldest - 1, Limit: 4}, span(ids, 3, 0)},
		{"around everything", store.HistoryQuery{Around: ids[60], Limit: 100}, span(ids, 109, 10)},
	})

	t.Run("scroll back", func(t *testing.T) {
		for _, limit := range []int{1, 7, 50, 100} {
			equalIDs(t, fmt.Sprintf("scroll back by %d", limit), allHistory(t, s, ch, limit), span(ids, n-1, 0))
		}
	})
	t.Run("scroll forward", func(t *testing.T) {
		var got []snowflake.ID
		after := oldest - 1
		for {
			page := mustList(t, s, ch, store.HistoryQuery{After: after, Limit: 13})
			if len(page) == 0 {
				break
			}
			slices.Reverse(page)
			got = append(got, page...)
			after = page[len(page)-1]
		}
		slices.Reverse(got)
		equalIDs(t, "scroll forward", got, span(ids, n-1, 0))
	})
}

// testBucketBoundary: messages straddling the boundary between two
// 10-day buckets, several per millisecond right at the edge.
func testBucketBoundary(t *testing.T, s store.Store) {
	ch := rid()
	k := bucketOf(idAt(base, 0)) + 3
	edge := bucketStart(k)
	var ids []snowflake.ID // oldest first
	for d := -5; d < 5; d++ {
		at := edge.Add(time.Duration(d) * time.Millisecond)
		ids = append(ids, idAt(at, 0), idAt(at, 1), idAt(at, 1<<22-1))
	}
	ids = slices.Insert(ids, 0, idAt(edge.Add(-store.DefaultBucketWidth+time.Millisecond), 5)) // start of bucket k-1
	ids = append(ids, idAt(edge.Add(store.DefaultBucketWidth-time.Millisecond), 5))            // end of bucket k
	putAll(t, s, ch, ids)
	first := slices.Index(ids, snowflake.FromTime(edge)) // first id of bucket k
	if first < 0 || bucketOf(ids[first]) != k || bucketOf(ids[first-1]) != k-1 {
		t.Fatalf("test setup: bad boundary at %d", first)
	}
	n := len(ids)

	if b := mustBuckets(t, s, ch); !slices.Equal(b, []int64{k, k - 1}) {
		t.Fatalf("Buckets = %v, want [%d %d]", b, k, k-1)
	}
	runCases(t, s, ch, []historyCase{
		{"newest page spans buckets", store.HistoryQuery{Limit: 20}, span(ids, n-1, n-20)},
		{"all", store.HistoryQuery{Limit: 100}, span(ids, n-1, 0)},
		{"before first of newer bucket", store.HistoryQuery{Before: ids[first], Limit: 3}, span(ids, first-1, first-3)},
		{"before FromTime(edge)", store.HistoryQuery{Before: snowflake.FromTime(edge), Limit: 100}, span(ids, first-1, 0)},
		{"before second of newer bucket", store.HistoryQuery{Before: ids[first+1], Limit: 3}, span(ids, first, first-2)},
		{"after last of older bucket", store.HistoryQuery{After: ids[first-1], Limit: 3}, span(ids, first+2, first)},
		{"after second last of older bucket", store.HistoryQuery{After: ids[first-2], Limit: 3}, span(ids, first+1, first-1)},
		{"after FromTime(edge)-1", store.HistoryQuery{After: snowflake.FromTime(edge) - 1, Limit: 100}, span(ids, n-1, first)},
		{"page spanning from older", store.HistoryQuery{After: ids[0], Limit: 100}, span(ids, n-1, 1)},
		{"around edge", store.HistoryQuery{Around: ids[first], Limit: 5}, span(ids, first+2, first-2)},
		{"around last of older", store.HistoryQuery{Around: ids[first-1], Limit: 4}, span(ids, first, first-3)},
		{"around missing at edge", store.HistoryQuery{Around: snowflake.FromTime(edge) + 2, Limit: 4}, span(ids, first+3, first)},
	})
	equalIDs(t, "scroll back", allHistory(t, s, ch, 4), span(ids, n-1, 0))

	// Emptying the newer bucket drops it from Buckets and from reads.
	ctx := ctxT(t)
	noErr(t, "DeleteMessages", s.DeleteMessages(ctx, ch, ids[first:]))
	if b := mustBuckets(t, s, ch); !slices.Equal(b, []int64{k - 1}) {
		t.Fatalf("Buckets after emptying bucket %d = %v", k, b)
	}
	equalIDs(t, "history after emptying", mustList(t, s, ch, store.HistoryQuery{Limit: 100}), span(ids, first-1, 0))
	equalIDs(t, "after into emptied bucket", mustList(t, s, ch, store.HistoryQuery{After: ids[first-1]}), nil)
}

// testSparse: messages months and years apart; buckets in between empty.
func testSparse(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ch := rid()
	start := base.Add(-4 * 365 * 24 * time.Hour)
	var ids []snowflake.ID
	for i := range 12 {
		at := start.Add(time.Duration(i*i*29) * 24 * time.Hour) // gaps grow: 29, 87, 145 ... days
		ids = append(ids, idAt(at, 1))
		if i%3 == 0 { // a few buckets hold more than one
			ids = append(ids, idAt(at.Add(time.Hour), 1), idAt(at.Add(2*time.Hour), 1))
		}
	}
	putAll(t, s, ch, ids)
	n := len(ids)
	buckets := wantBuckets(ids)
	if len(buckets) != 12 {
		t.Fatalf("test setup: %d buckets", len(buckets))
	}
	if got := mustBuckets(t, s, ch); !slices.Equal(got, buckets) {
		t.Fatalf("Buckets:\n got %v\nwant %v", got, buckets)
	}
	for _, limit := range []int{1, 2, 3, 100} {
		equalIDs(t, fmt.Sprintf("scroll back by %d", limit), allHistory(t, s, ch, limit), span(ids, n-1, 0))
	}
	runCases(t, s, ch, []historyCase{
		{"newest page reaches years back", store.HistoryQuery{}, span(ids, n-1, 0)},
		{"before skips empty buckets", store.HistoryQuery{Before: ids[n-1], Limit: 1}, span(ids, n-2, n-2)},
		{"after skips empty buckets", store.HistoryQuery{After: ids[2], Limit: 2}, span(ids, 4, 3)},
		{"after oldest of last gap", store.HistoryQuery{After: ids[n-2], Limit: 100}, span(ids, n-1, n-1)},
		{"around in a gap", store.HistoryQuery{Around: ids[n-2] + (ids[n-1]-ids[n-2])/2, Limit: 2}, span(ids, n-1, n-2)},
		{"around in a long gap", store.HistoryQuery{Around: snowflake.FromTime(base.Add(5 * 365 * 24 * time.Hour)), Limit: 3}, span(ids, n-1, n-3)},
	})

	// Empty one bucket message by message and another with a bulk delete.
	var lone, multi []snowflake.ID
	for _, id := range ids {
		switch bucketOf(id) {
		case buckets[1]:
			lone = append(lone, id)
		case bucketOf(ids[0]):
			multi = append(multi, id)
		}
	}
	if len(lone) != 1 || len(multi) != 3 {
		t.Fatalf("test setup: lone %v multi %v", lone, multi)
	}
	for _, id := range multi[:2] {
		noErr(t, "DeleteMessage", s.DeleteMessage(ctx, ch, id))
	}
	if got := mustBuckets(t, s, ch); !slices.Equal(got, buckets) {
		t.Fatalf("Buckets after a partial delete:\n got %v\nwant %v", got, buckets)
	}
	noErr(t, "DeleteMessage", s.DeleteMessage(ctx, ch, multi[2]))
	noErr(t, "DeleteMessages", s.DeleteMessages(ctx, ch, lone))
	var rest []snowflake.ID
	for _, id := range ids {
		if !slices.Contains(lone, id) && !slices.Contains(multi, id) {
			rest = append(rest, id)
		}
	}
	if got, want := mustBuckets(t, s, ch), wantBuckets(rest); !slices.Equal(got, want) {
		t.Fatalf("Buckets after emptying two:\n got %v\nwant %v", got, want)
	}
	equalIDs(t, "scroll back after deletes", allHistory(t, s, ch, 2), span(rest, len(rest)-1, 0))

	// Writing into an emptied bucket brings it back.
	noErr(t, "PutMessage", s.PutMessage(ctx, msg(ch, lone[0])))
	rest = append(rest, lone[0])
	slices.Sort(rest)
	if got, want := mustBuckets(t, s, ch), wantBuckets(rest); !slices.Equal(got, want) {
		t.Fatalf("Buckets after refilling:\n got %v\nwant %v", got, want)
	}
	equalIDs(t, "scroll back after refilling", allHistory(t, s, ch, 5), span(rest, len(rest)-1, 0))
}

func testBulkDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ch, other := rid(), rid()
	var ids []snowflake.ID
	for i := range 60 {
		ids = append(ids, idAt(base.Add(time.Duration(i)*6*time.Hour), 3)) // 15 days: 2-3 buckets
	}
	putAll(t, s, ch, ids)
	putAll(t, s, other, ids[:10])

	noErr(t, "DeleteMessages none", s.DeleteMessages(ctx, ch, nil))
	var del, keep []snowflake.ID
	for i, id := range ids {
		if i%3 == 0 || i >= 50 {
			del = append(del, id)
		} else {
			keep = append(keep, id)
		}
	}
	unknown := []snowflake.ID{idAt(base, 999), idAt(base.Add(-400*24*time.Hour), 1)}
	noErr(t, "DeleteMessages", s.DeleteMessages(ctx, ch, append(slices.Clone(del), unknown...)))
	equalIDs(t, "history", allHistory(t, s, ch, 100), span(keep, len(keep)-1, 0))
	for _, id := range del[:3] {
		_, err := s.GetMessage(ctx, ch, id)
		wantErr(t, "GetMessage deleted", err, store.ErrNotFound)
	}
	if got, want := mustBuckets(t, s, ch), wantBuckets(keep); !slices.Equal(got, want) {
		t.Fatalf("Buckets:\n got %v\nwant %v", got, want)
	}
	equalIDs(t, "other channel untouched", mustList(t, s, other, store.HistoryQuery{}), span(ids, 9, 0))

	// Deleting twice, then everything.
	noErr(t, "DeleteMessages again", s.DeleteMessages(ctx, ch, del))
	noErr(t, "DeleteMessages all", s.DeleteMessages(ctx, ch, ids))
	equalIDs(t, "history after deleting all", mustList(t, s, ch, store.HistoryQuery{}), nil)
	if got := mustBuckets(t, s, ch); len(got) != 0 {
		t.Fatalf("Buckets after deleting all: %v", got)
	}
	// The channel is usable again.
	putAll(t, s, ch, ids[:1])
	equalIDs(t, "history after refill", mustList(t, s, ch, store.HistoryQuery{}), ids[:1])
}

// testTimeCursors: snowflake.FromTime(t) as a cursor selects by instant;
// a zero cursor is no cursor.
func testTimeCursors(t *testing.T, s store.Store) {
	ch := rid()
	t0 := base.Add(17 * time.Hour)
	var ids []snowflake.ID
	for i := range 10 {
		ids = append(ids, idAt(t0.Add(time.Duration(i)*time.Hour), uint64(1+i)))
	}
	putAll(t, s, ch, ids)
	at := func(h int) snowflake.ID { return snowflake.FromTime(t0.Add(time.Duration(h) * time.Hour)) }
	if snowflake.FromTime(time.Unix(0, 0)) != 0 {
		t.Fatal("FromTime before the epoch is not 0")
	}
	runCases(t, s, ch, []historyCase{
		{"before 0 is newest", store.HistoryQuery{Before: 0, Limit: 3}, span(ids, 9, 7)},
		{"after 0 is newest", store.HistoryQuery{After: 0, Limit: 3}, span(ids, 9, 7)},
		{"before FromTime(pre-epoch)", store.HistoryQuery{Before: snowflake.FromTime(time.Unix(0, 0)), Limit: 3}, span(ids, 9, 7)},
		{"before an instant", store.HistoryQuery{Before: at(5), Limit: 100}, span(ids, 4, 0)},
		{"before an instant between", store.HistoryQuery{Before: snowflake.FromTime(t0.Add(5*time.Hour + time.Minute)), Limit: 2}, span(ids, 5, 4)},
		{"after an instant", store.HistoryQuery{After: at(5), Limit: 100}, span(ids, 9, 5)},
		{"after an instant limit", store.HistoryQuery{After: at(5), Limit: 2}, span(ids, 6, 5)},
		{"after long ago", store.HistoryQuery{After: snowflake.FromTime(t0.Add(-1000 * time.Hour)), Limit: 3}, span(ids, 2, 0)},
		{"before far future", store.HistoryQuery{Before: snowflake.FromTime(t0.Add(1000 * time.Hour)), Limit: 3}, span(ids, 9, 7)},
		{"after far future", store.HistoryQuery{After: snowflake.FromTime(t0.Add(1000 * time.Hour))}, nil},
		{"around an instant", store.HistoryQuery{Around: at(5), Limit: 4}, span(ids, 6, 3)},
	})
}

// testConcurrent: many writers (and deleters) on one channel.
func testConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ch := rid()
	const writers, each = 8, 40
	// Writer w writes ids w, w+writers, ...: interleaved in time, across
	// a bucket boundary.
	edge := bucketStart(bucketOf(idAt(base, 0)) + 1)
	all := make([]snowflake.ID, writers*each)
	for i := range all {
		all[i] = idAt(edge.Add(time.Duration(i-len(all)/2)*time.Second), uint64(i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(all); i += writers {
				if err := s.PutMessage(ctx, msg(ch, all[i])); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("PutMessage: %v", err)
	}
	equalIDs(t, "history", allHistory(t, s, ch, 100), span(all, len(all)-1, 0))

	// Writers re-put the second half while deleters remove the first half
	// in several bulk deletes; the older bucket empties.
	half := len(all) / 2
	if bucketOf(all[half-1]) == bucketOf(all[half]) {
		t.Fatal("test setup: halves share a bucket")
	}
	errs = make(chan error, 2*writers)
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := half + w; i < len(all); i += writers {
				m := msg(ch, all[i])
				m.Content = "again"
				if err := s.PutMessage(ctx, m); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			var batch []snowflake.ID
			for i := w; i < half; i += writers {
				batch = append(batch, all[i])
			}
			if err := s.DeleteMessages(ctx, ch, batch); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write/delete: %v", err)
	}
	equalIDs(t, "history after deletes", allHistory(t, s, ch, 100), span(all, len(all)-1, half))
	if got, want := mustBuckets(t, s, ch), wantBuckets(all[half:]); !slices.Equal(got, want) {
		t.Fatalf("Buckets:\n got %v\nwant %v", got, want)
	}
}
