//go:build integration

package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// BenchmarkPublish measures what publishing costs the API's request path:
// Outbox.Publish (one synced local write, the relay appends later) against
// appending to Kafka directly (acks=all), in the same run.
func BenchmarkPublish(b *testing.B) {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		b.Fatal("CONCORD_KAFKA is not set: run `make test`, or start a broker with `hack/kafka/kafka.sh start`")
	}
	l, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	topic := fmt.Sprintf("bench.publish.%d", time.Now().UnixNano())
	ctx := context.Background()
	if err := l.EnsureTopic(ctx, topic, 8); err != nil {
		b.Fatal(err)
	}
	ev := func(i int) eventlog.MessageEvent {
		return eventlog.MessageEvent{Type: eventlog.MessageCreate, GuildID: 1, ChannelID: snowflake.ID(100 + i%50), MessageID: snowflake.ID(1_000_000 + i), AuthorID: 3}
	}
	b.Run("outbox", func(b *testing.B) {
		ob, err := outbox.New(outbox.Config{Dir: b.TempDir()}, topicLog{l, topic})
		if err != nil {
			b.Fatal(err)
		}
		defer ob.Close()
		lat := make([]time.Duration, 0, b.N)
		timeouts := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			err := ob.Publish(ctx, ev(i))
			lat = append(lat, time.Since(t0))
			if errors.Is(err, context.DeadlineExceeded) {
				timeouts++ // bounded: the caller answers anyway
			} else if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		report(b, lat)
		b.ReportMetric(float64(timeouts), "timeouts")
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := ob.Flush(fctx); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("kafka-append-peer", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			r, err := ev(i).Record()
			if err != nil {
				b.Fatal(err)
			}
			r.Topic = topic
			t0 := time.Now()
			if err := l.Append(ctx, r); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		report(b, lat)
	})
}

// topicLog redirects appends to a benchmark topic.
type topicLog struct {
	eventlog.Log
	topic string
}

func (t topicLog) Append(ctx context.Context, rs ...eventlog.Record) error {
	for i := range rs {
		rs[i].Topic = t.topic
	}
	return t.Log.Append(ctx, rs...)
}

// report adds the p50, p99 and max latency of the calls.
func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(1), "max-µs")
}
