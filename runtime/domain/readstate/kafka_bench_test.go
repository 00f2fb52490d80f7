//go:build integration

package readstate_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

const benchEvents = 50_000

var (
	benchOnce  sync.Once
	benchTopic string
	benchErr   error
)

func kafkaAddr(b *testing.B) string {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		b.Fatal("CONCORD_KAFKA is not set: run `make test`, or start a broker with `hack/kafka/kafka.sh start` and set CONCORD_KAFKA=127.0.0.1:9092")
	}
	return addr
}

// benchLog fills a fresh topic with benchEvents message events once per
// process: 100 channels, each message mentioning two of 1,000 users, every
// hundredth an @everyone.
func benchLog(b *testing.B) (eventlog.Log, string) {
	addr := kafkaAddr(b)
	l, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	benchOnce.Do(func() {
		ctx := context.Background()
		benchTopic = fmt.Sprintf("bench.readstate.%d", time.Now().UnixNano())
		if benchErr = l.EnsureTopic(ctx, benchTopic, 8); benchErr != nil {
			return
		}
		var batch []eventlog.Record
		for i := 0; i < benchEvents; i++ {
			ev := eventlog.MessageEvent{Type: eventlog.MessageCreate, GuildID: guild, ChannelID: snowflake.ID(100 + i%100),
				MessageID: snowflake.ID(1_000_000 + i), AuthorID: author,
				Mentions:        []snowflake.ID{snowflake.ID(2000 + i%1000), snowflake.ID(2000 + (i*7)%1000)},
				MentionEveryone: i%100 == 0}
			r, err := ev.Record()
			if err != nil {
				benchErr = err
				return
			}
			r.Topic = benchTopic
			batch = append(batch, r)
			if len(batch) == 1000 {
				if benchErr = l.Append(ctx, batch...); benchErr != nil {
					return
				}
				batch = batch[:0]
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return l, benchTopic
}

// countingHandler is the bare sarama peer: it marks each message and
// counts until it has seen want.
type countingHandler struct {
	n      atomic.Int64
	want   int64
	cancel context.CancelFunc
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countingHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		if h.n.Add(1) == h.want {
			h.cancel()
		}
	}
	return nil
}

// BenchmarkMentionConsumer measures the read-state mention consumer (the
// kafka adapter, decoding, dedupe, counting into the LRU) against a bare
// sarama consumer group reading the same topic, in the same run. One op
// consumes the whole topic (benchEvents events) with a fresh group; run it
// with -benchtime=Nx.
func BenchmarkMentionConsumer(b *testing.B) {
	_, topic := benchLog(b)
	addr := kafkaAddr(b)
	b.Run("bare-sarama", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V4_0_0_0
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			cg, err := sarama.NewConsumerGroup([]string{addr}, fmt.Sprintf("bench-bare-%d-%d", time.Now().UnixNano(), i), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			h := &countingHandler{want: benchEvents, cancel: cancel}
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
					b.Fatal(err)
				}
			}
			cancel()
			cg.Close()
			if h.n.Load() < benchEvents {
				b.Fatalf("bare consumer read %d of %d", h.n.Load(), benchEvents)
			}
		}
		b.ReportMetric(float64(b.N*benchEvents)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("readstate", func(b *testing.B) {
		l, _ := benchLog(b)
		for i := 0; i < b.N; i++ {
			s := newService(b, readstate.Config{Topic: topic}, newStore(b, ""), &visibility{}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			// Stop once every event is applied (checked every millisecond).
			go func() {
				t := time.NewTicker(time.Millisecond)
				defer t.Stop()
				for s.Stats().Events < benchEvents && ctx.Err() == nil {
					<-t.C
				}
				cancel()
			}()
			if err := l.Consume(ctx, fmt.Sprintf("bench-rs-%d-%d", time.Now().UnixNano(), i), []string{topic}, s.Handler()); err != nil {
				b.Fatal(err)
			}
			cancel()
			if st := s.Stats(); st.Events < benchEvents || st.Mentions == 0 {
				b.Fatalf("read-state consumer applied %+v of %d events", st, benchEvents)
			}
		}
		b.ReportMetric(float64(b.N*benchEvents)/b.Elapsed().Seconds(), "events/s")
	})
}
