package snowflake_test

import (
	"testing"
	"time"

	bwsnowflake "github.com/bwmarrin/snowflake"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// BenchmarkNext compares this generator with github.com/bwmarrin/snowflake
// in one run. Both sit on Discord's layout (bwmarrin: epoch set to Discord's,
// 10 node bits = worker+process, 12 step bits).
//
//   - serial, parallel: sustained minting. Both wait for the next
//     millisecond once its 4096 ids are used up, so both converge on the
//     layout's ceiling of 1 ms / 4096 = 244 ns per id per generator.
//   - burst: the cost of one call below that ceiling: 4000 ids, then the
//     timer stops until the next millisecond.
func BenchmarkNext(b *testing.B) {
	bwsnowflake.Epoch = snowflake.Epoch
	newConcord := func(b *testing.B) func() {
		g, err := snowflake.New(snowflake.Config{Worker: 1, Process: 2})
		if err != nil {
			b.Fatal(err)
		}
		return func() {
			if _, err := g.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
	newBwmarrin := func(b *testing.B) func() {
		n, err := bwsnowflake.NewNode(1<<5 | 2)
		if err != nil {
			b.Fatal(err)
		}
		return func() { _ = n.Generate() }
	}
	for _, impl := range []struct {
		name string
		new  func(*testing.B) func()
	}{{"concord", newConcord}, {"bwmarrin", newBwmarrin}} {
		b.Run(impl.name+"/serial", func(b *testing.B) {
			next := impl.new(b)
			b.ReportAllocs()
			for b.Loop() {
				next()
			}
		})
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			next := impl.new(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					next()
				}
			})
		})
		b.Run(impl.name+"/burst", func(b *testing.B) {
			next := impl.new(b)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i++; i%4000 == 0 {
					b.StopTimer()
					ms := time.Now().UnixMilli()
					for time.Now().UnixMilli() <= ms+1 { // a whole new ms
					}
					b.StartTimer()
				}
				next()
			}
		})
	}
}
