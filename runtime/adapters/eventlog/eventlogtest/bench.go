package eventlogtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// Bench runs the port's benchmarks: durable appends one record at a time
// and in batches of 100 (each op is one acknowledged record), and a
// consumer group reading what was appended.
func Bench(b *testing.B, newLog NewFunc) {
	value := make([]byte, 200)
	b.Run("Append", func(b *testing.B) {
		l := newLog(b)
		topic := Name(b, "t")
		ctx := context.Background()
		if err := l.EnsureTopic(ctx, topic, 8); err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1)
				if err := l.Append(ctx, eventlog.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 64)), Value: value}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("AppendBatch100", func(b *testing.B) {
		l := newLog(b)
		topic := Name(b, "t")
		ctx := context.Background()
		if err := l.EnsureTopic(ctx, topic, 8); err != nil {
			b.Fatal(err)
		}
		batch := make([]eventlog.Record, 100)
		for i := range batch {
			batch[i] = eventlog.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 64)), Value: value}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i += len(batch) {
			if err := l.Append(ctx, batch[:min(len(batch), b.N-i)]...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Consume", func(b *testing.B) {
		l := newLog(b)
		topic := Name(b, "t")
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := l.EnsureTopic(ctx, topic, 8); err != nil {
			b.Fatal(err)
		}
		batch := make([]eventlog.Record, 0, 500)
		for i := 0; i < b.N; i++ {
			batch = append(batch, eventlog.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 64)), Value: value})
			if len(batch) == cap(batch) || i == b.N-1 {
				if err := l.Append(ctx, batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		var n atomic.Int64
		cctx, stop := context.WithCancel(ctx)
		b.ResetTimer()
		err := l.Consume(cctx, Name(b, "g"), []string{topic}, eventlog.Each(func(context.Context, eventlog.Record) error {
			if n.Add(1) == int64(b.N) {
				stop()
			}
			return nil
		}))
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if n.Load() < int64(b.N) {
			b.Fatalf("consumed %d of %d", n.Load(), b.N)
		}
	})
}
