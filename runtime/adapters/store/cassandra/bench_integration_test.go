//go:build integration

package cassandra_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/adapters/store/storetest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// BenchmarkStore runs the storage benchmarks (newest page, scroll-back
// across 1,000 sparse buckets, single and parallel writes at the store's
// consistency) against Cassandra and, as the peer in the same run, the
// embedded Pebble store:
//
//	export CONCORD_CASSANDRA="$(hack/cassandra/start.sh)"
//	go test -tags integration -run '^$' -bench Store -benchtime 2s ./runtime/adapters/store/cassandra/
func BenchmarkStore(b *testing.B) {
	addr := server(b)
	cfg := testConfig(addr, sharedKeyspace(b, addr))
	b.Run("cassandra", func(b *testing.B) {
		storetest.Bench(b, func(b *testing.B) store.Store { return newTestStore(b, cfg) })
	})
	b.Run("pebble", func(b *testing.B) {
		storetest.Bench(b, func(b *testing.B) store.Store {
			s, err := pebble.New(pebble.Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			return s
		})
	})
}

// BenchmarkWriteThroughput: sends (PutMessage at LOCAL_QUORUM) from 64
// concurrent writers spread over 64 channels, as a send storm on the local
// node looks; reported as writes/s, Pebble as the peer:
//
//	go test -tags integration -run '^$' -bench WriteThroughput -benchtime 5s ./runtime/adapters/store/cassandra/
func BenchmarkWriteThroughput(b *testing.B) {
	addr := server(b)
	cfg := testConfig(addr, sharedKeyspace(b, addr))
	cfg.Narrowing.Disabled = true
	run := func(b *testing.B, s store.Store) {
		defer s.Close()
		ctx := context.Background()
		var seq atomic.Uint64
		t0 := time.Now()
		b.SetParallelism(32) // 64 writers on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := seq.Add(1)
				m := store.Message{ID: snowflake.FromTime(t0.Add(time.Duration(n)*time.Microsecond)) | snowflake.ID(n&0xfff),
					ChannelID: snowflake.ID(1<<40 + n%64), AuthorID: 42,
					Content: "a typical message of some sixty characters, give or take a few"}
				if err := s.PutMessage(ctx, m); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	}
	b.Run("cassandra", func(b *testing.B) { run(b, newTestStore(b, cfg)) })
	b.Run("pebble", func(b *testing.B) {
		s, err := pebble.New(pebble.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		run(b, s)
	})
}
