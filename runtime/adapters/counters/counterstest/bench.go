package counterstest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Bench runs the port's benchmarks, each op one call: Incr and Take spread
// over 1,024 keys, Take on one hot key, and Banned over two keys (what the
// rate-limit middleware asks on every request).
func Bench(b *testing.B, newCounters NewFunc) {
	ctx := context.Background()
	keys := func(b *testing.B) []string {
		ks := make([]string, 1024)
		for i := range ks {
			ks[i] = Key(b, fmt.Sprint(i))
		}
		return ks
	}
	b.Run("Incr", func(b *testing.B) {
		c, ks := newCounters(b).Counters, keys(b)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Incr(ctx, ks[n.Add(1)%int64(len(ks))], 1, time.Minute); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Take", func(b *testing.B) {
		c, ks := newCounters(b).Counters, keys(b)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Take(ctx, ks[n.Add(1)%int64(len(ks))], 50, time.Second, time.Now()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("TakeHotKey", func(b *testing.B) {
		c, k := newCounters(b).Counters, Key(b, "hot")
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Take(ctx, k, 50, time.Second, time.Now()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Banned", func(b *testing.B) {
		c, ks := newCounters(b).Counters, keys(b)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1)
				if _, err := c.Banned(ctx, ks[i%int64(len(ks))], ks[(i+1)%int64(len(ks))]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
