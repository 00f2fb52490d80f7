//go:build integration

package cassandrastore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/cassandrastore"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/storetest"
)

// Open returns a Store in a fresh keyspace of the CONCORD_CASSANDRA
// server, dropped when the test ends; it fails, never skips, without one.
func Open(t testing.TB) *cassandrastore.Store {
	s, _ := open(t)
	return s
}

// open is Open with the chat store under it.
func open(t testing.TB) (*cassandrastore.Store, *cassandra.Store) {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test-deps` and source ~/.cache/concord/test-env.sh")
	}
	ks := fmt.Sprintf("concord_live_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	ctx := context.Background()
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{addr}, Keyspace: ks, ReplicationFactor: 1, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		c := gocql.NewCluster(addr)
		c.Timeout = time.Minute
		if s, err := c.CreateSession(); err == nil {
			s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	s, err := cassandrastore.New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

func TestConformance(t *testing.T) { storetest.Run(t, Open(t)) }

// TestBucketsWrittenBeforeVersion2 reads buckets as the previous schema
// version left them: only a live_buckets row (one shard count, last write
// wins). A sampled stream's bucket written then with 16 shards, then
// written by this version with 1 (the stream left sampled mode), lists
// every comment: the old row is never lowered; and a
// bucket with no live_bucket_shards row at all is still listed.
func TestBucketsWrittenBeforeVersion2(t *testing.T) {
	ctx := context.Background()
	s, st := open(t)
	sess := st.Session()
	stream := snowflake.FromTime(time.Now())
	start := time.Now().Add(-3 * time.Hour).Truncate(10 * time.Minute).Add(time.Minute).UTC()
	var cs []live.Comment
	for i := range 40 {
		at := start.Add(time.Duration(i) * time.Second).Truncate(time.Millisecond)
		cs = append(cs, live.Comment{ID: snowflake.FromTime(at) + snowflake.ID(i+1), StreamID: stream, Seq: int64(10 * (i + 1)),
			Author: live.Author{ID: 42, Username: "ann"}, Text: fmt.Sprintf("comment %d", i), VideoTSMs: int64(i) * 1000, CreatedAt: at})
	}
	// The previous version wrote the first 30 with 16 shards: its rows
	// are in live_buckets only.
	if err := s.PutComments(ctx, live.SampledShards, cs[:30]); err != nil {
		t.Fatal(err)
	}
	if err := sess.Query(`DELETE FROM live_bucket_shards WHERE stream_id = ?`, int64(stream)).Exec(); err != nil {
		t.Fatal(err)
	}
	list := func() (created, replay int) {
		t.Helper()
		a, err := s.List(ctx, stream, live.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.List(ctx, stream, live.Page{Replay: true, AfterVideoTS: -1, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(a), len(b)
	}
	if c, r := list(); c != 30 || r != 30 {
		t.Fatalf("buckets only in live_buckets: listed %d, replayed %d of 30", c, r)
	}
	// This version (a fresh process: nothing cached) writes the rest with 1.
	s2, err := cassandrastore.New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.PutComments(ctx, 1, cs[30:]); err != nil {
		t.Fatal(err)
	}
	if c, r := list(); c != 40 || r != 40 {
		t.Fatalf("after 1-shard writes into a 16-shard bucket of the previous version: listed %d, replayed %d of 40", c, r)
	}
	var old int
	if err := sess.Query(`SELECT shards FROM live_buckets WHERE stream_id = ? AND kind = 0 AND bucket = ?`, int64(stream), live.Bucket(start)).Scan(&old); err != nil || old != live.SampledShards {
		t.Fatalf("live_buckets row lowered to %d (%v): readers of the previous version would lose shards", old, err)
	}
}
