//go:build integration

package readstate_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// TestKafkaRebalanceNoDoubleCount runs the read-state consumer on real
// Kafka while a second member joins and leaves its group, and checks the
// table against the exact number of mentions: nothing lost, nothing counted
// twice across the rebalances.
func TestKafkaRebalanceNoDoubleCount(t *testing.T) {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		t.Fatal("CONCORD_KAFKA is not set: run `make test`, or start a broker with `hack/kafka/kafka.sh start` and set CONCORD_KAFKA=127.0.0.1:9092")
	}
	newLog := func() eventlog.Log {
		l, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{addr}, CommitInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	topic := fmt.Sprintf("it.readstate.%d", time.Now().UnixNano())
	group := topic + ".rs"
	la, lb := newLog(), newLog()
	if err := la.EnsureTopic(context.Background(), topic, 8); err != nil {
		t.Fatal(err)
	}
	st := newStore(t, "")
	cfg := readstate.Config{FlushInterval: 50 * time.Millisecond, Group: group, Topic: topic, Users: 4, Shards: 2}
	users := []snowflake.ID{alice, bob, carol, 14, 15}
	want := map[[2]snowflake.ID]int{}
	id := snowflake.ID(5000)
	batch := func(n int) {
		var rs []eventlog.Record
		for i := 0; i < n; i++ {
			id++
			u, ch := users[int(id)%len(users)], snowflake.ID(100+int(id)%8)
			want[[2]snowflake.ID{u, ch}]++
			r, err := create(id, ch, false, u).Record()
			if err != nil {
				t.Fatal(err)
			}
			r.Topic = topic
			rs = append(rs, r)
		}
		if err := la.Append(context.Background(), rs...); err != nil {
			t.Fatal(err)
		}
	}
	// exact reports whether the table holds exactly want; more than want
	// fails at once.
	exact := func() bool {
		c := newService(t, readstate.Config{}, st, &visibility{}, nil)
		ok := true
		for k, n := range want {
			got := mentionCount(t, c, k[0], k[1])
			if got > n {
				t.Fatalf("user %d channel %d: %d mentions in the table, want %d (counted twice)", k[0], k[1], got, n)
			}
			ok = ok && got == n
		}
		return ok
	}
	waitExact := func(what string) {
		deadline := time.Now().Add(60 * time.Second)
		for !exact() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the table never reached the expected counts", what)
			}
			time.Sleep(50 * time.Millisecond) // polling a condition, bounded by the deadline
		}
	}

	a := run(newService(t, cfg, st, &visibility{}, nil), la)
	batch(300)
	waitExact("one member")
	b := run(newService(t, cfg, st, &visibility{}, nil), lb)
	// Publish until the second member has applied events (it owns
	// partitions after the rebalance).
	deadline := time.Now().Add(60 * time.Second)
	for b.s.Stats().Events == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second member never received a partition")
		}
		batch(20)
		time.Sleep(100 * time.Millisecond) // pacing the producer while polling a condition
	}
	batch(300)
	waitExact("after the second member joined")
	if a.s.Stats().Events == 0 {
		t.Fatal("the first member applied nothing")
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	batch(300)
	waitExact("after the second member left")
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if !exact() {
		t.Fatal("counts changed after the last member stopped")
	}
}

// TestKafkaKillBeforeFlush is TestKillBeforeFlush on real Kafka: counts
// rebuilt from the committed offsets of a Kafka consumer group.
func TestKafkaKillBeforeFlush(t *testing.T) {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		t.Fatal("CONCORD_KAFKA is not set: run `make test`, or start a broker with `hack/kafka/kafka.sh start` and set CONCORD_KAFKA=127.0.0.1:9092")
	}
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprintf("evictions=%v", evict), func(t *testing.T) {
			l, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{addr}, CommitInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			topic := fmt.Sprintf("it.readstate.kill.%d", time.Now().UnixNano())
			if err := l.EnsureTopic(context.Background(), topic, 4); err != nil {
				t.Fatal(err)
			}
			killBeforeFlush(t, l, topic, topic+".rs", evict)
		})
	}
}
