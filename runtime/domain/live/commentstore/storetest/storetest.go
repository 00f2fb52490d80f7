// Package storetest is the conformance suite of live.Store: the Pebble
// adapter runs it always, the Cassandra adapter under the integration tag.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

var next atomic.Uint64

func newID() snowflake.ID { return snowflake.FromTime(time.Now()) + snowflake.ID(next.Add(1)<<12) }

// comments makes n comments of stream, seq 10, 20, ..., one every step
// from start, video timestamps vts(i).
func comments(stream snowflake.ID, n int, start time.Time, step time.Duration, vts func(int) int64) []live.Comment {
	out := make([]live.Comment, n)
	for i := range out {
		at := start.Add(time.Duration(i) * step).UTC().Truncate(time.Millisecond)
		out[i] = live.Comment{
			ID: snowflake.FromTime(at) + snowflake.ID(i+1), StreamID: stream, Seq: int64(10 * (i + 1)),
			Author: live.Author{ID: 42, Username: "ann"}, Text: fmt.Sprintf("comment %d", i),
			VideoTSMs: vts(i), CreatedAt: at,
		}
	}
	return out
}

func seqs(cs []live.Comment) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

func eq(a []int64, b ...int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Run runs the suite against s.
func Run(t *testing.T, s live.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now().Add(-2 * time.Hour)
	linear := func(i int) int64 { return int64(i) * 1000 }

	t.Run("Streams", func(t *testing.T) {
		id := newID()
		if _, err := s.GetStream(ctx, id); !errors.Is(err, live.ErrNotFound) {
			t.Fatalf("GetStream unknown = %v, want ErrNotFound", err)
		}
		st := live.Stream{ID: id, CreatorID: 5, Title: "t", State: live.StateLive, StartedAt: start.UTC().Truncate(time.Millisecond),
			Partition: 3, SlowModeSeconds: 7, BlockedTerms: []string{"x"}, Moderators: []snowflake.ID{9}}
		if err := s.PutStream(ctx, st); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetStream(ctx, id)
		if err != nil || got.Partition != 3 || got.SlowModeSeconds != 7 || len(got.Moderators) != 1 || !got.StartedAt.Equal(st.StartedAt) || got.EndedAt != nil {
			t.Fatalf("GetStream = %+v, %v", got, err)
		}
		end := start.Add(time.Hour).UTC().Truncate(time.Millisecond)
		st.State, st.EndedAt = live.StateEnded, &end
		s.PutStream(ctx, st)
		got, _ = s.GetStream(ctx, id)
		if got.State != live.StateEnded || got.EndedAt == nil || !got.EndedAt.Equal(end) {
			t.Fatalf("ended stream = %+v", got)
		}
	})

	t.Run("ScrollBackAcrossBuckets", func(t *testing.T) {
		stream := newID()
		// 30 comments 3 minutes apart span 9 ten-minute buckets.
		cs := comments(stream, 30, start, 3*time.Minute, linear)
		if err := s.PutComments(ctx, 1, cs[:17]); err != nil {
			t.Fatal(err)
		}
		if err := s.PutComments(ctx, 1, cs[17:]); err != nil {
			t.Fatal(err)
		}
		got, err := s.List(ctx, stream, live.Page{Limit: 5})
		if err != nil || !eq(seqs(got), 300, 290, 280, 270, 260) {
			t.Fatalf("newest page = %v, %v", seqs(got), err)
		}
		got, _ = s.List(ctx, stream, live.Page{Before: 260, Limit: 4})
		if !eq(seqs(got), 250, 240, 230, 220) {
			t.Fatalf("before 260 = %v", seqs(got))
		}
		got, _ = s.List(ctx, stream, live.Page{Before: 35, Limit: 100})
		if !eq(seqs(got), 30, 20, 10) {
			t.Fatalf("before 35 = %v", seqs(got))
		}
		all, _ := s.List(ctx, stream, live.Page{Limit: 100})
		if len(all) != 30 || all[0].Text != "comment 29" || all[0].Author.Username != "ann" || !all[0].CreatedAt.Equal(cs[29].CreatedAt) {
			t.Fatalf("all = %d, first %+v", len(all), all[0])
		}
		if other, _ := s.List(ctx, newID(), live.Page{Limit: 10}); len(other) != 0 {
			t.Fatalf("unknown stream listed %d", len(other))
		}
	})

	t.Run("ReplayByVideoTimestamp", func(t *testing.T) {
		stream := newID()
		// Video timestamps out of seq order and 4 minutes apart: the replay
		// walks several video buckets and orders by timestamp, not seq.
		vts := func(i int) int64 { return int64((i*7)%20) * 4 * 60 * 1000 }
		cs := comments(stream, 20, start, time.Second, vts)
		if err := s.PutComments(ctx, 1, cs); err != nil {
			t.Fatal(err)
		}
		got, err := s.List(ctx, stream, live.Page{Replay: true, AfterVideoTS: -1, Limit: 100})
		if err != nil || len(got) != 20 {
			t.Fatalf("replay all = %d, %v", len(got), err)
		}
		for i := 1; i < len(got); i++ {
			if got[i].VideoTSMs < got[i-1].VideoTSMs {
				t.Fatalf("replay not ascending at %d: %d after %d", i, got[i].VideoTSMs, got[i-1].VideoTSMs)
			}
		}
		after := got[9].VideoTSMs
		page, _ := s.List(ctx, stream, live.Page{Replay: true, AfterVideoTS: after, Limit: 3})
		if len(page) != 3 || page[0].VideoTSMs <= after || page[0].Seq != got[10].Seq || page[2].Seq != got[12].Seq {
			t.Fatalf("replay after %d = %+v", after, page)
		}
	})

	t.Run("RetractIsSoftAndSticky", func(t *testing.T) {
		stream := newID()
		cs := comments(stream, 5, start, time.Minute, linear)
		s.PutComments(ctx, 1, cs)
		if err := s.Retract(ctx, stream, cs[2].ID, "spam"); err != nil {
			t.Fatal(err)
		}
		if err := s.Retract(ctx, stream, newID(), "x"); !errors.Is(err, live.ErrNotFound) {
			t.Fatalf("Retract unknown = %v", err)
		}
		// The archiver may write the comment again after the takedown
		// (redelivery): the soft delete must survive.
		s.PutComments(ctx, 1, cs[2:3])
		got, _ := s.List(ctx, stream, live.Page{Limit: 10})
		if !eq(seqs(got), 50, 40, 20, 10) {
			t.Fatalf("after retract = %v", seqs(got))
		}
		rep, _ := s.List(ctx, stream, live.Page{Replay: true, AfterVideoTS: -1, Limit: 10})
		if !eq(seqs(rep), 10, 20, 40, 50) {
			t.Fatalf("replay after retract = %v", seqs(rep))
		}
		c, err := s.GetComment(ctx, stream, cs[2].ID)
		if err != nil || !c.Retracted || c.Reason != "spam" || c.Seq != 30 {
			t.Fatalf("GetComment retracted = %+v, %v", c, err)
		}
	})

	t.Run("ShadowOnlyForAuthor", func(t *testing.T) {
		stream := newID()
		cs := comments(stream, 3, start, time.Second, linear)
		cs[1].Shadow = true
		s.PutComments(ctx, 1, cs)
		if got, _ := s.List(ctx, stream, live.Page{Limit: 10, Viewer: 7}); !eq(seqs(got), 30, 10) {
			t.Fatalf("other viewer = %v", seqs(got))
		}
		if got, _ := s.List(ctx, stream, live.Page{Limit: 10, Viewer: 42}); !eq(seqs(got), 30, 20, 10) {
			t.Fatalf("author = %v", seqs(got))
		}
	})

	t.Run("SampledShardsMerge", func(t *testing.T) {
		stream := newID()
		cs := comments(stream, 40, start, 20*time.Second, linear)
		if err := s.PutComments(ctx, live.SampledShards, cs); err != nil {
			t.Fatal(err)
		}
		got, _ := s.List(ctx, stream, live.Page{Limit: 100})
		if len(got) != 40 {
			t.Fatalf("sampled listed %d", len(got))
		}
		for i := range got {
			if got[i].Seq != int64(10*(40-i)) {
				t.Fatalf("sampled order at %d: %d", i, got[i].Seq)
			}
		}
		page, _ := s.List(ctx, stream, live.Page{Before: 205, Limit: 3})
		if !eq(seqs(page), 200, 190, 180) {
			t.Fatalf("sampled before = %v", seqs(page))
		}
		if c, err := s.GetComment(ctx, stream, cs[7].ID); err != nil || c.Seq != 80 {
			t.Fatalf("sampled GetComment = %+v %v", c, err)
		}
	})

	// A stream that turns sampled and back inside one bucket: its first
	// comments are in one shard, the next in SampledShards, the last in
	// one again (the archiver follows the router's mode). Every one stays
	// listed, in order, by scroll-back and replay: a bucket's shard count
	// never shrinks, whichever write came last.
	t.Run("ShardsChangeInsideABucket", func(t *testing.T) {
		stream := newID()
		cs := comments(stream, 40, start.Truncate(10*time.Minute).Add(time.Minute), time.Second, linear)
		for _, part := range []struct {
			shards   int
			from, to int
		}{{1, 0, 10}, {live.SampledShards, 10, 30}, {1, 30, 40}} {
			if err := s.PutComments(ctx, part.shards, cs[part.from:part.to]); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.List(ctx, stream, live.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 40 {
			t.Fatalf("listed %d of 40 comments written with 1, %d, then 1 shards", len(got), live.SampledShards)
		}
		for i := range got {
			if got[i].Seq != int64(10*(40-i)) {
				t.Fatalf("order at %d: %d", i, got[i].Seq)
			}
		}
		replay, err := s.List(ctx, stream, live.Page{Replay: true, AfterVideoTS: -1, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(replay) != 40 || replay[0].Seq != 10 || replay[39].Seq != 400 {
			t.Fatalf("replay listed %d (%v)", len(replay), seqs(replay))
		}
		for _, i := range []int{0, 15, 35} {
			if c, err := s.GetComment(ctx, stream, cs[i].ID); err != nil || c.Seq != cs[i].Seq {
				t.Fatalf("GetComment %d = %+v %v", i, c, err)
			}
		}
	})
}
