// Package recenttest is the conformance suite of live.Recent and
// live.Nonces: the in-process cache runs it always, the Redis adapter
// under the integration tag.
package recenttest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Cache is what the suite tests.
type Cache interface {
	live.Recent
	live.Nonces
}

var next atomic.Uint64

// stream returns a stream id unique to this run, so runs can share a
// server.
func stream() snowflake.ID {
	return snowflake.FromTime(time.Now()) + snowflake.ID(next.Add(1))
}

func comment(s snowflake.ID, seq int64) live.Event {
	return live.Event{Kind: live.KindComment, Seq: seq, Comment: &live.Comment{
		ID: snowflake.ID(1000 + seq), StreamID: s, Seq: seq, Author: live.Author{ID: 7, Username: "u"},
		Text: fmt.Sprintf("c%d", seq), CreatedAt: time.UnixMilli(1700000000000).UTC(),
	}}
}

func seqs(evs []live.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func eq(a, b []int64) bool {
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

// Run runs the suite against c.
func Run(t *testing.T, c Cache) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("RangeOrderAndBounds", func(t *testing.T) {
		s := stream()
		if err := c.Add(ctx, s, []live.Event{comment(s, 30), comment(s, 10), comment(s, 20)}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Range(ctx, s, -1, 0, 10)
		if err != nil || !eq(seqs(got), []int64{10, 20, 30}) {
			t.Fatalf("Range all = %v, %v", seqs(got), err)
		}
		got, _ = c.Range(ctx, s, -1, 0, 2)
		if !eq(seqs(got), []int64{20, 30}) {
			t.Fatalf("newest 2 = %v", seqs(got))
		}
		got, _ = c.Range(ctx, s, 10, 30, 10)
		if !eq(seqs(got), []int64{20}) {
			t.Fatalf("(10,30) = %v", seqs(got))
		}
		got, _ = c.Range(ctx, s, -1, 20, 1)
		if !eq(seqs(got), []int64{10}) {
			t.Fatalf("before 20 = %v", seqs(got))
		}
		if got[0].Comment == nil || got[0].Comment.Text != "c10" || got[0].Comment.StreamID != s {
			t.Fatalf("event round trip = %+v", got[0])
		}
		empty, err := c.Range(ctx, stream(), -1, 0, 5)
		if err != nil || len(empty) != 0 {
			t.Fatalf("unknown stream = %v, %v", empty, err)
		}
	})
	t.Run("AddIsIdempotent", func(t *testing.T) {
		s := stream()
		for range 3 {
			if err := c.Add(ctx, s, []live.Event{comment(s, 5), comment(s, 6)}); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := c.Range(ctx, s, -1, 0, 10)
		if !eq(seqs(got), []int64{5, 6}) {
			t.Fatalf("after repeats = %v", seqs(got))
		}
	})
	t.Run("TrimsToRecentSize", func(t *testing.T) {
		s := stream()
		var evs []live.Event
		for i := range live.RecentSize + 20 {
			evs = append(evs, comment(s, int64(i)))
		}
		if err := c.Add(ctx, s, evs[:300]); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(ctx, s, evs[300:]); err != nil {
			t.Fatal(err)
		}
		got, _ := c.Range(ctx, s, -1, 0, 1000)
		if len(got) != live.RecentSize || got[0].Seq != 20 || got[len(got)-1].Seq != int64(live.RecentSize+19) {
			t.Fatalf("kept %d events from %d", len(got), got[0].Seq)
		}
	})
	t.Run("Drop", func(t *testing.T) {
		s := stream()
		c.Add(ctx, s, []live.Event{comment(s, 1), comment(s, 2), comment(s, 3)})
		if err := c.Drop(ctx, s, 2); err != nil {
			t.Fatal(err)
		}
		if err := c.Drop(ctx, s, 99); err != nil {
			t.Fatal(err)
		}
		got, _ := c.Range(ctx, s, -1, 0, 10)
		if !eq(seqs(got), []int64{1, 3}) {
			t.Fatalf("after drop = %v", seqs(got))
		}
	})
	t.Run("Expire", func(t *testing.T) {
		s := stream()
		c.Add(ctx, s, []live.Event{comment(s, 1)})
		if err := c.Expire(ctx, s, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := c.Range(ctx, s, -1, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("stream did not expire")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("Nonces", func(t *testing.T) {
		key := fmt.Sprintf("n-%d", stream())
		v, claimed, err := c.Claim(ctx, key, time.Minute)
		if err != nil || !claimed || v != nil {
			t.Fatalf("first Claim = %q %v %v", v, claimed, err)
		}
		v, claimed, err = c.Claim(ctx, key, time.Minute)
		if err != nil || claimed || v != nil {
			t.Fatalf("pending Claim = %q %v %v", v, claimed, err)
		}
		if err := c.Set(ctx, key, []byte("done"), time.Minute); err != nil {
			t.Fatal(err)
		}
		v, claimed, _ = c.Claim(ctx, key, time.Minute)
		if claimed || string(v) != "done" {
			t.Fatalf("set Claim = %q %v", v, claimed)
		}
		key2 := key + "-r"
		c.Claim(ctx, key2, time.Minute)
		if err := c.Release(ctx, key2); err != nil {
			t.Fatal(err)
		}
		if _, claimed, _ := c.Claim(ctx, key2, time.Minute); !claimed {
			t.Fatal("released key not claimable")
		}
	})
}
