package archiver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/pebblestore"
)

// shardLog is a live.Store that records the shard count of every
// PutComments call before passing it on.
type shardLog struct {
	live.Store
	mu    sync.Mutex
	calls []int
}

func (s *shardLog) PutComments(ctx context.Context, shards int, cs []live.Comment) error {
	s.mu.Lock()
	s.calls = append(s.calls, shards)
	s.mu.Unlock()
	return s.Store.PutComments(ctx, shards, cs)
}

func (s *shardLog) last() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[len(s.calls)-1]
}

// A stream the router holds sampled (its mark on the board) is written
// over live.SampledShards store partitions, one that is not over one;
// the archiver notices a change within ShardCheck. Every comment stays
// listed in order across the switches.
func TestSampledStreamsWriteSixteenShards(t *testing.T) {
	ctx := context.Background()
	ps, err := pebblestore.Open(t.TempDir(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	st := &shardLog{Store: ps}
	brd := board.New()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, err := New(Config{Now: func() time.Time { return now }}, Deps{Log: nopLog{}, Store: st, Board: brd})
	if err != nil {
		t.Fatal(err)
	}
	stream := snowflake.FromTime(now)
	seq := int64(0)
	write := func(n int) {
		t.Helper()
		var batch []live.LogRecord
		for range n {
			seq++
			at := now.Add(time.Duration(seq) * time.Millisecond)
			c := live.Comment{ID: snowflake.FromTime(at) + snowflake.ID(seq), StreamID: stream, Seq: seq,
				Author: live.Author{ID: 7, Username: "ann"}, Text: fmt.Sprint("comment ", seq), CreatedAt: at}
			batch = append(batch, live.LogRecord{Kind: live.KindComment, StreamID: stream, Comment: &c})
		}
		if err := a.write(ctx, 0, batch); err != nil {
			t.Fatal(err)
		}
	}
	write(10)
	if got := st.last(); got != 1 {
		t.Fatalf("not sampled: %d shards", got)
	}
	if err := brd.Put(ctx, live.SampledKey(stream), []byte(`{"state":"live","sampled":true}`), registry.WhileAlive); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Second)
	write(40)
	if got := st.last(); got != live.SampledShards {
		t.Fatalf("sampled on the board: %d shards, want %d", got, live.SampledShards)
	}
	if err := brd.Delete(ctx, live.SampledKey(stream)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	write(5)
	if got := st.last(); got != live.SampledShards {
		t.Fatalf("1 s after leaving sampled mode: %d shards (the count is kept for ShardCheck)", got)
	}
	now = now.Add(5 * time.Second)
	write(5)
	if got := st.last(); got != 1 {
		t.Fatalf("back to normal: %d shards", got)
	}
	got, err := ps.List(ctx, stream, live.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 60 || got[0].Seq != 60 || got[59].Seq != 1 {
		t.Fatalf("listed %d of 60 after 1, 16, 1 shards", len(got))
	}
}

// nopLog is a live.Consumer that is never run.
type nopLog struct{ live.Consumer }
