package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Bench runs the history benchmarks against the store newStore returns
// (called once per benchmark; the store is closed at its end):
//
//   - NewestPage/limit=N: the newest page of a busy channel (10,000
//     messages over ~30 days);
//   - Sparse/ScrollBack: scrolling back through a whole sparse channel
//     (1,000 non-empty buckets, each followed by an empty one, 3 messages
//     each) with limit 100 pages; also reported per page;
//   - Sparse/Page: one Before page (limit 50) at a random point of that
//     channel;
//   - Sparse/Buckets: listing those 1,000 buckets;
//   - Write: one synced PutMessage; WriteParallel: the same from many
//     goroutines (group commit).
//
// Stores with a Flush() error method (store/pebble) are flushed after the
// setup, so reads come from the on-disk tables rather than the memtable.
func Bench(b *testing.B, newStore func(b *testing.B) store.Store) {
	open := func(b *testing.B) store.Store {
		s := newStore(b)
		b.Cleanup(func() {
			if err := s.Close(); err != nil {
				b.Errorf("Close: %v", err)
			}
		})
		return s
	}

	b.Run("NewestPage", func(b *testing.B) {
		s := open(b)
		ch := rid()
		const n = 10000
		start := time.Now().Add(-30 * 24 * time.Hour)
		ids := make([]snowflake.ID, n)
		for i := range ids {
			ids[i] = idAt(start.Add(time.Duration(i)*259*time.Second), uint64(i))
		}
		putAll(b, s, ch, ids)
		flush(b, s)
		for _, limit := range []int{50, 100} {
			b.Run(limitName(limit), func(b *testing.B) {
				ctx := ctxT(b)
				for b.Loop() {
					page, err := s.ListMessages(ctx, ch, store.HistoryQuery{Limit: limit})
					if err != nil || len(page) != limit {
						b.Fatalf("ListMessages: %d, %v", len(page), err)
					}
				}
			})
		}
	})

	b.Run("Sparse", func(b *testing.B) {
		s := open(b)
		ch := rid()
		const buckets, per = 1000, 3
		first := bucketOf(snowflake.FromTime(time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)))
		var ids []snowflake.ID
		for i := range buckets {
			at := bucketStart(first + int64(2*i)).Add(time.Duration(i%7) * 24 * time.Hour)
			for j := range per {
				ids = append(ids, idAt(at.Add(time.Duration(j)*time.Hour), uint64(j)))
			}
		}
		putAll(b, s, ch, ids)
		flush(b, s)
		if got := mustBuckets(b, s, ch); len(got) != buckets {
			b.Fatalf("setup: %d buckets", len(got))
		}

		b.Run("ScrollBack", func(b *testing.B) {
			ctx := ctxT(b)
			pages := 0
			for b.Loop() {
				var before snowflake.ID
				total := 0
				for {
					page, err := s.ListMessages(ctx, ch, store.HistoryQuery{Before: before, Limit: 100})
					if err != nil {
						b.Fatal(err)
					}
					pages++
					if len(page) == 0 {
						break
					}
					total += len(page)
					before = page[len(page)-1].ID
				}
				if total != len(ids) {
					b.Fatalf("scrolled back %d of %d", total, len(ids))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
		})
		b.Run("Page", func(b *testing.B) {
			ctx := ctxT(b)
			for b.Loop() {
				before := ids[rand.IntN(len(ids)-100)+100]
				page, err := s.ListMessages(ctx, ch, store.HistoryQuery{Before: before, Limit: 50})
				if err != nil || len(page) != 50 {
					b.Fatalf("ListMessages: %d, %v", len(page), err)
				}
			}
		})
		b.Run("Buckets", func(b *testing.B) {
			ctx := ctxT(b)
			for b.Loop() {
				got, err := s.Buckets(ctx, ch)
				if err != nil || len(got) != buckets {
					b.Fatalf("Buckets: %d, %v", len(got), err)
				}
			}
		})
	})

	b.Run("Write", func(b *testing.B) {
		s := open(b)
		ctx := ctxT(b)
		ch := rid()
		t0 := time.Now()
		i := 0
		for b.Loop() {
			m := msg(ch, idAt(t0.Add(time.Duration(i)*time.Millisecond), 0))
			m.Content = "a typical message of some sixty characters, give or take a few"
			if err := s.PutMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})

	b.Run("WriteParallel", func(b *testing.B) {
		s := open(b)
		ctx := ctxT(b)
		ch := rid()
		t0 := time.Now()
		b.SetParallelism(4) // 4×GOMAXPROCS writers
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := msg(ch, idAt(t0, rand.Uint64()))
				m.Content = "a typical message of some sixty characters, give or take a few"
				if err := s.PutMessage(ctx, m); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func limitName(n int) string {
	return "limit=" + snowflake.ID(n).String()
}

// flush flushes stores that can (see Bench).
func flush(b *testing.B, s store.Store) {
	if f, ok := s.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			b.Fatalf("Flush: %v", err)
		}
	}
}
