//go:build integration

package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestCassandraRowsOfADeadWriterReachKafka runs the production pair, a
// real Cassandra and a real Kafka: a writer commits messages with their
// events in logged batches and dies before relaying any; a live process
// that did not write them relays them by its sweep, each once, and
// deletes the rows after Kafka acknowledged.
func TestCassandraRowsOfADeadWriterReachKafka(t *testing.T) {
	caddr, kaddr := os.Getenv("CONCORD_CASSANDRA"), os.Getenv("CONCORD_KAFKA")
	if caddr == "" || kaddr == "" {
		t.Fatal("CONCORD_CASSANDRA and CONCORD_KAFKA must be set: run `make test-deps` and source ~/.cache/concord/test-env.sh")
	}
	ks := fmt.Sprintf("concord_outbox_%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{caddr}, Keyspace: ks, ReplicationFactor: 1, Timeout: time.Minute, NumConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		c := gocql.NewCluster(caddr)
		c.Timeout = time.Minute
		if sess, err := c.CreateSession(); err == nil {
			if err := sess.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec(); err != nil {
				t.Logf("drop keyspace %s: %v", ks, err)
			}
			sess.Close()
		}
	})
	kl, err := kafka.New(ctx, kafka.Config{Brokers: []string{kaddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	topic := fmt.Sprintf("test.outbox.%d", time.Now().UnixNano())
	if err := kl.EnsureTopic(ctx, topic, 4); err != nil {
		t.Fatal(err)
	}

	// The survivor runs first; its start-up pass is over before the
	// writer commits anything, so only the sweep can find the rows.
	ob, err := outbox.New(outbox.Config{SweepAge: time.Second, SweepEvery: 200 * time.Millisecond}, topicLog{kl, topic})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.RelayStore(st)
	if err := ob.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The writer: three messages with their events, then it is gone.
	ch := snowflake.ID(rand.Uint64() >> 1)
	for i := uint64(1); i <= 3; i++ {
		ev := eventlog.MessageEvent{Type: eventlog.MessageCreate, GuildID: 1, ChannelID: ch, MessageID: snowflake.ID(i), AuthorID: 3}
		r, err := ev.Record()
		if err != nil {
			t.Fatal(err)
		}
		m := store.Message{ID: snowflake.ID(i), ChannelID: ch, GuildID: 1, AuthorID: 3, Content: "m"}
		if err := st.PutMessageEvents(ctx, m, store.Event{Topic: r.Topic, Key: r.Key, Value: r.Value}); err != nil {
			t.Fatal(err)
		}
	}

	got := make(chan snowflake.ID, 16)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- kl.Consume(cctx, "reader-"+topic, []string{topic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
			ev, err := eventlog.DecodeMessageEvent(r.Value)
			if err != nil {
				return err
			}
			got <- ev.MessageID
			return nil
		}))
	}()
	defer func() { stop(); <-done }()
	var ids []snowflake.ID
	for len(ids) < 3 {
		select {
		case id := <-got:
			ids = append(ids, id)
		case <-time.After(90 * time.Second):
			t.Fatalf("Kafka delivered %v of the dead writer's 3 events", ids)
		}
	}
	for i, id := range ids {
		if id != snowflake.ID(i+1) {
			t.Fatalf("Kafka delivered %v, want 1 2 3 in write order", ids)
		}
	}
	// Deleted after the ack: the rows go (await the state, bounded).
	deadline := time.Now().Add(60 * time.Second)
	for {
		es, err := st.ListOutbox(ctx, store.OutboxShard(ch), 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left in the outbox after Kafka took them", len(es))
		}
		<-time.After(50 * time.Millisecond)
	}
	ends, err := kl.End(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range ends {
		sum += e
	}
	if sum != 3 {
		t.Fatalf("the topic holds %d records, want 3 (each event once)", sum)
	}
}
