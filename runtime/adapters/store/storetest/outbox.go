package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// testOutbox pins the transactional outbox (store.TransactionalOutbox):
// events written with a message are listed, in write order, until
// deleted. Other subtests and other users of a shared database write to
// the same shards, so every check looks only at the subtest's own events
// (their values are unique).
func testOutbox(t *testing.T, s store.Store) {
	tx, ok := s.(store.TransactionalOutbox)
	if !ok {
		t.Fatalf("%T does not implement store.TransactionalOutbox", s)
	}
	t.Run("PutMessageEventsCommitsBoth", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ch := rid()
		m := fullMessage(ch, rid(), idAt(time.Now(), 1))
		evs := events(ch, "create", 2)
		before := time.Now()
		if err := tx.PutMessageEvents(ctx, m, evs...); err != nil {
			t.Fatalf("PutMessageEvents: %v", err)
		}
		got, err := s.GetMessage(ctx, ch, m.ID)
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		if got.Content != m.Content {
			t.Fatalf("content = %q, want %q", got.Content, m.Content)
		}
		if b, err := s.Buckets(ctx, ch); err != nil || len(b) != 1 || b[0] != bucketOf(m.ID) {
			t.Fatalf("Buckets = %v, %v; want [%d]", b, err, bucketOf(m.ID))
		}
		mine := ownEntries(t, tx, ch, evs, 0)
		if len(mine) != len(evs) {
			t.Fatalf("listed %d of the %d events written", len(mine), len(evs))
		}
		for i, e := range mine {
			if e.Shard != store.OutboxShard(ch) {
				t.Errorf("entry %d in shard %d, want %d", i, e.Shard, store.OutboxShard(ch))
			}
			if e.Event.Topic != evs[i].Topic || !bytes.Equal(e.Event.Key, evs[i].Key) || !bytes.Equal(e.Event.Value, evs[i].Value) {
				t.Errorf("entry %d = %+v, want %+v (in write order)", i, e.Event, evs[i])
			}
			if e.Written.Before(before.Add(-time.Minute)) || e.Written.After(time.Now().Add(time.Minute)) {
				t.Errorf("entry %d written at %v, not around %v", i, e.Written, before)
			}
		}
		deleteOwn(t, tx, mine)
	})
	t.Run("WriteOrderAcrossCalls", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ch := rid()
		var all []store.Event
		for i := range 5 {
			ev := events(ch, fmt.Sprintf("seq%d", i), 1)
			m := fullMessage(ch, rid(), idAt(time.Now(), uint64(i+1)))
			if err := tx.PutMessageEvents(ctx, m, ev...); err != nil {
				t.Fatalf("PutMessageEvents %d: %v", i, err)
			}
			all = append(all, ev...)
		}
		mine := ownEntries(t, tx, ch, all, 0)
		if len(mine) != len(all) {
			t.Fatalf("listed %d of %d", len(mine), len(all))
		}
		for i, e := range mine {
			if !bytes.Equal(e.Event.Value, all[i].Value) {
				t.Fatalf("entry %d is %q, want %q: not in write order", i, e.Event.Value, all[i].Value)
			}
		}
		deleteOwn(t, tx, mine)
	})
	t.Run("OlderThan", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ch := rid()
		evs := events(ch, "age", 1)
		if err := tx.PutMessageEvents(ctx, fullMessage(ch, rid(), idAt(time.Now(), 2)), evs...); err != nil {
			t.Fatalf("PutMessageEvents: %v", err)
		}
		if mine := ownEntries(t, tx, ch, evs, time.Hour); len(mine) != 0 {
			t.Fatalf("an entry written just now is listed as older than an hour: %+v", mine)
		}
		mine := ownEntries(t, tx, ch, evs, 0)
		if len(mine) != 1 {
			t.Fatalf("listed %d, want 1", len(mine))
		}
		deleteOwn(t, tx, mine)
	})
	t.Run("RangeWindows", func(t *testing.T) {
		rng, ok := s.(store.OutboxRange)
		if !ok {
			t.Skipf("%T lists no outbox windows (store.OutboxRange is optional)", s)
		}
		t.Parallel()
		ctx := context.Background()
		ch := rid()
		a, b := events(ch, "early", 1), events(ch, "late", 1)
		for i, ev := range [][]store.Event{a, b} {
			if err := tx.PutMessageEvents(ctx, fullMessage(ch, rid(), idAt(time.Now(), uint64(i+1))), ev...); err != nil {
				t.Fatalf("PutMessageEvents: %v", err)
			}
		}
		both := ownEntries(t, tx, ch, append(append([]store.Event(nil), a...), b...), 0)
		if len(both) != 2 || !both[0].Written.Before(both[1].Written) {
			t.Fatalf("entries %+v: want two, the first written earlier", both)
		}
		wa, wb := both[0].Written, both[1].Written
		window := func(from, to time.Time) []string {
			t.Helper()
			es, err := rng.ListOutboxRange(ctx, store.OutboxShard(ch), 10000, from, to)
			if err != nil {
				t.Fatalf("ListOutboxRange: %v", err)
			}
			var got []string
			for _, e := range es {
				if v := string(e.Event.Value); v == string(a[0].Value) || v == string(b[0].Value) {
					got = append(got, v)
				}
			}
			return got
		}
		for _, c := range []struct {
			name     string
			from, to time.Time
			want     []store.Event
		}{
			{"from the later", wb, time.Time{}, b},
			{"through the earlier", time.Time{}, wa, a},
			{"both ends inclusive", wa, wb, append(append([]store.Event(nil), a...), b...)},
			{"after both", wb.Add(time.Second), time.Time{}, nil},
		} {
			got := window(c.from, c.to)
			if len(got) != len(c.want) {
				t.Fatalf("%s: listed %q, want %d entries", c.name, got, len(c.want))
			}
			for i := range got {
				if got[i] != string(c.want[i].Value) {
					t.Fatalf("%s: listed %q, want %q first", c.name, got, c.want[0].Value)
				}
			}
		}
		deleteOwn(t, tx, both)
	})
	t.Run("DeleteOutboxRemovesOnlyNamed", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ch := rid()
		evs := events(ch, "del", 3)
		if err := tx.PutMessageEvents(ctx, fullMessage(ch, rid(), idAt(time.Now(), 3)), evs...); err != nil {
			t.Fatalf("PutMessageEvents: %v", err)
		}
		mine := ownEntries(t, tx, ch, evs, 0)
		if len(mine) != 3 {
			t.Fatalf("listed %d, want 3", len(mine))
		}
		shard := store.OutboxShard(ch)
		if err := tx.DeleteOutbox(ctx, shard, [][]byte{mine[0].ID, mine[2].ID}); err != nil {
			t.Fatalf("DeleteOutbox: %v", err)
		}
		left := ownEntries(t, tx, ch, evs, 0)
		if len(left) != 1 || !bytes.Equal(left[0].Event.Value, evs[1].Value) {
			t.Fatalf("after deleting the first and last: %+v, want only the middle one", left)
		}
		// Deleting what is gone is not an error (two relays, or a retry).
		if err := tx.DeleteOutbox(ctx, shard, [][]byte{mine[0].ID, mine[1].ID}); err != nil {
			t.Fatalf("DeleteOutbox again: %v", err)
		}
		if left := ownEntries(t, tx, ch, evs, 0); len(left) != 0 {
			t.Fatalf("entries left after deleting all: %+v", left)
		}
	})
	t.Run("DeleteMessagesEventsCommitsBoth", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ch, g := rid(), rid()
		a, b := fullMessage(ch, g, idAt(time.Now(), 4)), fullMessage(ch, g, idAt(time.Now(), 5))
		for _, m := range []store.Message{a, b} {
			if err := s.PutMessage(ctx, m); err != nil {
				t.Fatalf("PutMessage: %v", err)
			}
		}
		evs := events(ch, "gone", 2)
		if err := tx.DeleteMessagesEvents(ctx, ch, []snowflake.ID{a.ID, b.ID, rid()}, evs...); err != nil {
			t.Fatalf("DeleteMessagesEvents: %v", err)
		}
		for _, m := range []store.Message{a, b} {
			if _, err := s.GetMessage(ctx, ch, m.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("GetMessage of a deleted message: %v, want ErrNotFound", err)
			}
		}
		if bs, err := s.Buckets(ctx, ch); err != nil || len(bs) != 0 {
			t.Fatalf("Buckets after deleting every message = %v, %v; want none", bs, err)
		}
		mine := ownEntries(t, tx, ch, evs, 0)
		if len(mine) != 2 {
			t.Fatalf("listed %d delete events, want 2", len(mine))
		}
		deleteOwn(t, tx, mine)
		// Events of a delete whose messages are already gone (a retried
		// delete) are still committed.
		again := events(ch, "again", 1)
		if err := tx.DeleteMessagesEvents(ctx, ch, []snowflake.ID{a.ID}, again...); err != nil {
			t.Fatalf("DeleteMessagesEvents again: %v", err)
		}
		mine = ownEntries(t, tx, ch, again, 0)
		if len(mine) != 1 {
			t.Fatalf("listed %d events of the repeated delete, want 1", len(mine))
		}
		deleteOwn(t, tx, mine)
	})
	t.Run("ShardRange", func(t *testing.T) {
		t.Parallel()
		for _, shard := range []int{-1, store.OutboxShards} {
			if _, err := tx.ListOutbox(context.Background(), shard, 10, 0); err == nil {
				t.Errorf("ListOutbox(shard %d) = nil error, want an error", shard)
			}
		}
	})
}

// events returns n events of channel ch with unique values.
func events(ch snowflake.ID, what string, n int) []store.Event {
	out := make([]store.Event, n)
	for i := range out {
		out[i] = store.Event{Topic: "concord.test", Key: []byte(ch.String()), Value: fmt.Appendf(nil, "%s-%d-%d-%x", what, ch, i, rid())}
	}
	return out
}

// ownEntries lists ch's shard and keeps the entries whose values are in
// evs, in listed order.
func ownEntries(t *testing.T, tx store.Outbox, ch snowflake.ID, evs []store.Event, olderThan time.Duration) []store.OutboxEntry {
	t.Helper()
	want := map[string]bool{}
	for _, e := range evs {
		want[string(e.Value)] = true
	}
	all, err := tx.ListOutbox(context.Background(), store.OutboxShard(ch), 10000, olderThan)
	if err != nil {
		t.Fatalf("ListOutbox: %v", err)
	}
	var mine []store.OutboxEntry
	for _, e := range all {
		if want[string(e.Event.Value)] {
			mine = append(mine, e)
		}
	}
	return mine
}

func deleteOwn(t *testing.T, tx store.Outbox, es []store.OutboxEntry) {
	t.Helper()
	if len(es) == 0 {
		return
	}
	ids := make([][]byte, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	if err := tx.DeleteOutbox(context.Background(), es[0].Shard, ids); err != nil {
		t.Fatalf("DeleteOutbox: %v", err)
	}
	all, err := tx.ListOutbox(context.Background(), es[0].Shard, 10000, 0)
	if err != nil {
		t.Fatalf("ListOutbox: %v", err)
	}
	for _, e := range all {
		for _, id := range ids {
			if bytes.Equal(e.ID, id) {
				t.Fatalf("entry %x still listed after DeleteOutbox", id)
			}
		}
	}
}
