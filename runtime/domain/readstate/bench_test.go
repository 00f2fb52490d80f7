package readstate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	rspebble "github.com/concord-chat/concord/runtime/domain/readstate/pebble"
)

// BenchmarkAck measures acks through the read-state service on a synced
// Pebble table, 32 concurrent callers per core (a busy node's acks), three
// peers in one run: write-through, the service's acks as they are
// answered now (each in the table before its answer, group-committed);
// write-behind, the service before (answered from memory, one flush at the
// end inside the timing); and one synced write per ack, what write-through
// costs without group commit.
func BenchmarkAck(b *testing.B) {
	const users = 10_000
	service := func(b *testing.B, behind bool) {
		st, err := rspebble.New(rspebble.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		cs := &countingStore{Store: st}
		s := newService(b, readstate.Config{}, cs, &visibility{}, nil)
		if behind {
			readstate.WriteBehindAcks(s)
		}
		var n atomic.Int64
		b.SetParallelism(32)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				i := n.Add(1)
				if _, err := s.Ack(ctx, snowflake.ID(1+i%users), channel, snowflake.ID(1000+i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		// The write-behind is part of its cost: flush inside the timing.
		if err := s.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acks/s")
		b.ReportMetric(float64(b.N)/float64(max(cs.writes.Load(), 1)), "acks/write")
	}
	b.Run("write-through", func(b *testing.B) { service(b, false) })
	b.Run("write-behind-peer", func(b *testing.B) { service(b, true) })
	b.Run("write-per-ack-peer", func(b *testing.B) {
		st, err := rspebble.New(rspebble.Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		var n atomic.Int64
		b.SetParallelism(32)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				i := n.Add(1)
				r := readstate.Record{UserID: snowflake.ID(1 + i%users), ChannelID: channel, LastReadID: snowflake.ID(1000 + i), Version: i}
				if err := st.Write(ctx, []readstate.Record{r}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acks/s")
	})
}

// memberGuild is a Visibility for a guild whose members (and only they)
// see every channel.
type memberGuild struct {
	members map[snowflake.ID]struct{}
	calls   atomic.Int64
}

func newMemberGuild(n int) *memberGuild {
	g := &memberGuild{members: make(map[snowflake.ID]struct{}, n)}
	for i := 0; i < n; i++ {
		g.members[snowflake.ID(1_000_000+i)] = struct{}{}
	}
	return g
}

func (g *memberGuild) CanView(_ context.Context, user, _ snowflake.ID) bool {
	g.calls.Add(1)
	_, ok := g.members[user]
	return ok
}

// BenchmarkEveryone measures what one @everyone costs the read-state tier
// in guilds of growing size: records written to the table (writes/op) and
// visibility checks while consuming. The goal is O(1): one channel-level
// record whatever the guild size. The peer, per-member fan-out (one record
// per member that can see the channel), runs in the same benchmark for the
// sizes it can afford.
func BenchmarkEveryone(b *testing.B) {
	for _, members := range []int{1_000, 1_000_000} {
		g := newMemberGuild(members)
		b.Run(fmt.Sprintf("channel-entry/members=%d", members), func(b *testing.B) {
			st := newStore(b, "")
			s := newService(b, readstate.Config{}, st, g, nil)
			ctx := context.Background()
			g.calls.Store(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Apply(ctx, msg(b, snowflake.ID(10_000+i), int64(i), channel, nil, nil, true)); err != nil {
					b.Fatal(err)
				}
				if err := s.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(st.users.Load()+st.channels.Load())/float64(b.N), "writes/op")
			b.ReportMetric(float64(g.calls.Load())/float64(b.N), "visibility-checks/op")
			// Every member sees the mentions (capped at ChannelMentions).
			want := min(b.N, 100)
			for _, u := range []snowflake.ID{1_000_000, snowflake.ID(1_000_000 + members - 1)} {
				st, err := s.ChannelState(ctx, u, channel)
				if err != nil {
					b.Fatal(err)
				}
				if st.MentionCount != want {
					b.Fatalf("member %d sees %d mentions, want %d", u, st.MentionCount, want)
				}
			}
		})
		if members > 100_000 {
			continue // the peer would write a million records per op
		}
		b.Run(fmt.Sprintf("per-member-peer/members=%d", members), func(b *testing.B) {
			st := newStore(b, "")
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				recs := make([]readstate.Record, 0, members)
				for u := range g.members {
					if g.CanView(ctx, u, channel) {
						recs = append(recs, readstate.Record{UserID: u, ChannelID: channel, MentionCount: int32(i + 1)})
					}
				}
				if err := st.Write(ctx, recs, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.users.Load()+st.channels.Load())/float64(b.N), "writes/op")
		})
	}
}
