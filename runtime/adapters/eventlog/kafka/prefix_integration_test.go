//go:build integration

package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/eventlogtest"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
)

func prefixedLog(t testing.TB, prefix string) *kafka.Log {
	l, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers(t), TopicPrefix: prefix, Partitions: 2})
	if err != nil {
		t.Fatalf("kafka.New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestConformanceWithTopicPrefix: the whole suite through a prefix (claims,
// marks, records and the inspector all in the callers' names).
func TestConformanceWithTopicPrefix(t *testing.T) {
	prefix := fmt.Sprintf("conf-%06x.", rand.Uint32()&0xffffff)
	eventlogtest.Run(t, func(t testing.TB) eventlog.Log { return prefixedLog(t, prefix) })
}

// TestTopicPrefixSeparatesClusters: two clusters on one Kafka append to
// eventlog.MessagesTopic and consume it with the same group name; each
// sees only its own records, under its own name on the brokers.
func TestTopicPrefixSeparatesClusters(t *testing.T) {
	run := fmt.Sprintf("%06x", rand.Uint32()&0xffffff)
	pa, pb := "a"+run+".", "b"+run+"."
	a, b := prefixedLog(t, pa), prefixedLog(t, pb)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 20
	for i := range n {
		for _, c := range []struct {
			l    *kafka.Log
			name string
		}{{a, "a"}, {b, "b"}} {
			rec := eventlog.Record{Topic: eventlog.MessagesTopic, Key: []byte("k"), Value: []byte(fmt.Sprintf("%s%d", c.name, i))}
			if err := c.l.Append(ctx, rec); err != nil {
				t.Fatalf("append %s: %v", c.name, err)
			}
		}
	}
	// consume reads n records of topic on l as group and returns them.
	consume := func(l *kafka.Log, group, topic string) []eventlog.Record {
		cctx, stop := context.WithCancel(ctx)
		var (
			mu  sync.Mutex
			got []eventlog.Record
		)
		done := make(chan error, 1)
		go func() {
			done <- l.Consume(cctx, group, []string{topic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, r)
				if len(got) == n {
					stop()
				}
				return nil
			}))
		}()
		select {
		case <-done:
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("consume %s on %s: %d of %d records", topic, group, len(got), n)
		}
		stop()
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	for _, c := range []struct {
		l    *kafka.Log
		name string
	}{{a, "a"}, {b, "b"}} {
		got := consume(c.l, "readstate", eventlog.MessagesTopic)
		for _, r := range got {
			if r.Topic != eventlog.MessagesTopic || string(r.Value[:1]) != c.name {
				t.Fatalf("cluster %s consumed %q from topic %q", c.name, r.Value, r.Topic)
			}
		}
		// Its group committed under its own name.
		committed, err := c.l.Committed(ctx, "readstate", eventlog.MessagesTopic)
		if err != nil {
			t.Fatal(err)
		}
		sum := int64(0)
		for _, o := range committed {
			sum += o
		}
		if sum != n {
			t.Fatalf("cluster %s: group committed %v, want %d records in all", c.name, committed, n)
		}
	}
	// On the brokers, cluster a's messages are the topic "<pa>messages".
	raw := prefixedLog(t, "")
	got := consume(raw, "raw"+run, pa+"messages")
	for _, r := range got {
		if string(r.Value[:1]) != "a" {
			t.Fatalf("%smessages holds %q", pa, r.Value)
		}
	}
}
