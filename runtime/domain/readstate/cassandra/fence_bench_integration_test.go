//go:build integration

package cassandra

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// BenchmarkUserWriteFence is what the owner-epoch fence costs a user's
// read-state write: each iteration writes one record (an ack) to a user
// whose partition this store claimed, through Write (the conditional
// batch, a Paxos round at LOCAL_SERIAL), and the same batch without its
// condition (a plain single-partition write), timed apart. The two
// alternate, so a load spike on the shared machine falls on both;
// fenced-ns/op and plain-ns/op are each write's mean and ratio their
// quotient.
func BenchmarkUserWriteFence(b *testing.B) {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		b.Fatal("CONCORD_CASSANDRA is not set: source ~/.cache/concord/test-env.sh or run hack/cassandra/start.sh")
	}
	ctx := context.Background()
	st, err := New(ctx, Config{Hosts: []string{addr}, Keyspace: "concord_readstate_it"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	// Fresh users per run, so reruns share the keyspace.
	base := snowflake.ID(time.Now().UnixNano())
	fencedUser, plainUser := base, base+1
	const epoch = 1
	for _, u := range []snowflake.ID{fencedUser, plainUser} {
		if _, err := st.Claim(ctx, u, epoch); err != nil {
			b.Fatal(err)
		}
	}
	rec := func(user snowflake.ID, i int) readstate.Record {
		return readstate.Record{UserID: user, ChannelID: 42, LastReadID: snowflake.ID(1000 + i), Version: int64(i + 1),
			NextOffset: int64(i + 1), Epoch: epoch}
	}
	plain := func(r readstate.Record) error {
		batch := st.s.Batch(gocql.UnloggedBatch)
		batch.Query(`UPDATE read_states SET last_read_id = ?, mention_count = ?, mention_ids = ?, flags = ?, version = ?, next_offset = ?
			WHERE user_id = ? AND channel_id = ?`, int64(r.LastReadID), int(r.MentionCount), encodeIDs(r.Mentions),
			int64(r.Flags), r.Version, r.NextOffset, int64(r.UserID), int64(r.ChannelID))
		return batch.ExecContext(ctx)
	}
	// One of each first: connections and prepared statements.
	if err := st.Write(ctx, []readstate.Record{rec(fencedUser, 0)}, nil); err != nil {
		b.Fatal(err)
	}
	if err := plain(rec(plainUser, 0)); err != nil {
		b.Fatal(err)
	}
	var (
		fenced, unfenced time.Duration
		i                int
	)
	for b.Loop() {
		i++
		start := time.Now()
		if err := st.Write(ctx, []readstate.Record{rec(fencedUser, i)}, nil); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := plain(rec(plainUser, i)); err != nil {
			b.Fatal(err)
		}
		fenced += mid.Sub(start)
		unfenced += time.Since(mid)
	}
	n := float64(i)
	b.ReportMetric(float64(fenced.Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(unfenced.Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(fenced)/float64(unfenced), "ratio")
	// Both wrote what the last iteration wrote.
	for _, u := range []snowflake.ID{fencedUser, plainUser} {
		got, err := st.LoadUser(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		if !slices.ContainsFunc(got, func(r readstate.Record) bool { return r.Version == int64(i+1) }) {
			b.Fatalf("user %d: records %+v, want the last write (version %d)", u, got, i+1)
		}
	}
}
