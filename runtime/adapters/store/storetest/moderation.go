package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func testModeration(t *testing.T, s store.Store) {
	t.Run("Reactions", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch, m1, m2 := rid(), idAt(base, 1), idAt(base.Add(30*24*time.Hour), 2) // two buckets
		u1, u2, u3 := snowflake.ID(100), snowflake.ID(200), snowflake.ID(300)
		add := func(m snowflake.ID, e string, u snowflake.ID, want bool) {
			t.Helper()
			got, err := s.AddReaction(ctx, ch, m, e, u)
			noErr(t, "AddReaction", err)
			if got != want {
				t.Fatalf("AddReaction(%d, %q, %d) = %v, want %v", m, e, u, got, want)
			}
		}
		add(m1, "👍", u2, true)
		add(m1, "👍", u2, false) // again: nothing new
		add(m1, "👍", u1, true)
		add(m1, "party:123", u3, true)
		add(m2, "🔥", u1, true)
		counts, err := s.CountReactions(ctx, ch, []snowflake.ID{m1, m2, idAt(base, 3)}, u1)
		noErr(t, "CountReactions", err)
		equal(t, "counts", counts, map[snowflake.ID][]store.ReactionCount{
			m1: {{Emoji: "👍", Count: 2, Me: true}, {Emoji: "party:123", Count: 1}},
			m2: {{Emoji: "🔥", Count: 1, Me: true}},
		})
		users, err := s.ReactionUsers(ctx, ch, m1, "👍", 0, 10)
		noErr(t, "ReactionUsers", err)
		equalIDs(t, "users", users, []snowflake.ID{u1, u2})
		users, err = s.ReactionUsers(ctx, ch, m1, "👍", u1, 10)
		noErr(t, "ReactionUsers after", err)
		equalIDs(t, "users after", users, []snowflake.ID{u2})
		users, err = s.ReactionUsers(ctx, ch, m1, "👍", 0, 1)
		noErr(t, "ReactionUsers limit", err)
		equalIDs(t, "users limit", users, []snowflake.ID{u1})

		removed, err := s.RemoveReaction(ctx, ch, m1, "👍", u2)
		noErr(t, "RemoveReaction", err)
		again, err := s.RemoveReaction(ctx, ch, m1, "👍", u2)
		noErr(t, "RemoveReaction again", err)
		if !removed || again {
			t.Fatalf("RemoveReaction = %v then %v", removed, again)
		}
		noErr(t, "RemoveReactions emoji", s.RemoveReactions(ctx, ch, m1, "party:123"))
		counts, err = s.CountReactions(ctx, ch, []snowflake.ID{m1}, u3)
		noErr(t, "CountReactions", err)
		equal(t, "counts after removals", counts, map[snowflake.ID][]store.ReactionCount{m1: {{Emoji: "👍", Count: 1}}})
		noErr(t, "RemoveReactions all", s.RemoveReactions(ctx, ch, m1, ""))
		counts, err = s.CountReactions(ctx, ch, []snowflake.ID{m1, m2}, u3)
		noErr(t, "CountReactions", err)
		if len(counts[m1]) != 0 || len(counts[m2]) != 1 {
			t.Fatalf("counts after remove all = %+v", counts)
		}
	})

	t.Run("DeleteMessageDropsReactionsAndPin", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch := rid()
		ids := []snowflake.ID{idAt(base, 1), idAt(base, 2)}
		putAll(t, s, ch, ids)
		for _, id := range ids {
			_, err := s.AddReaction(ctx, ch, id, "✅", 7)
			noErr(t, "AddReaction", err)
			_, err = s.PinMessage(ctx, ch, id, ms(time.Now()))
			noErr(t, "PinMessage", err)
		}
		noErr(t, "DeleteMessage", s.DeleteMessage(ctx, ch, ids[0]))
		noErr(t, "DeleteMessages", s.DeleteMessages(ctx, ch, ids[1:]))
		counts, err := s.CountReactions(ctx, ch, ids, 7)
		noErr(t, "CountReactions", err)
		pins, err := s.ListPins(ctx, ch)
		noErr(t, "ListPins", err)
		if len(counts) != 0 || len(pins) != 0 {
			t.Fatalf("deleted messages keep reactions %+v or pins %+v", counts, pins)
		}
	})

	t.Run("Pins", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		ch := rid()
		now := ms(time.Now())
		for i, id := range []snowflake.ID{idAt(base, 1), idAt(base, 2), idAt(base, 3)} {
			ok, err := s.PinMessage(ctx, ch, id, now.Add(time.Duration(i)*time.Second))
			noErr(t, "PinMessage", err)
			if !ok {
				t.Fatal("PinMessage of a new pin = false")
			}
		}
		ok, err := s.PinMessage(ctx, ch, idAt(base, 1), now.Add(time.Hour))
		noErr(t, "PinMessage again", err)
		if ok {
			t.Fatal("PinMessage of a pinned message = true")
		}
		pins, err := s.ListPins(ctx, ch)
		noErr(t, "ListPins", err)
		equal(t, "pins newest first", pins, []store.Pin{
			{MessageID: idAt(base, 3), PinnedAt: now.Add(2 * time.Second)},
			{MessageID: idAt(base, 2), PinnedAt: now.Add(time.Second)},
			{MessageID: idAt(base, 1), PinnedAt: now},
		})
		ok, err = s.UnpinMessage(ctx, ch, idAt(base, 2))
		noErr(t, "UnpinMessage", err)
		again, err := s.UnpinMessage(ctx, ch, idAt(base, 2))
		noErr(t, "UnpinMessage again", err)
		if !ok || again {
			t.Fatalf("UnpinMessage = %v then %v", ok, again)
		}
		pins, err = s.ListPins(ctx, ch)
		noErr(t, "ListPins", err)
		if len(pins) != 2 {
			t.Fatalf("pins after unpin = %+v", pins)
		}
	})

	t.Run("Bans", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		g := rid()
		var users []snowflake.ID
		for i := range 5 {
			u := snowflake.ID(1000 + i)
			users = append(users, u)
			noErr(t, "PutBan", s.PutBan(ctx, store.Ban{GuildID: g, UserID: u, Reason: "spam", CreatedAt: ms(time.Now())}))
		}
		b, err := s.GetBan(ctx, g, users[2])
		noErr(t, "GetBan", err)
		if b.Reason != "spam" || b.UserID != users[2] || b.GuildID != g {
			t.Fatalf("GetBan = %+v", b)
		}
		_, err = s.GetBan(ctx, rid(), users[2])
		wantErr(t, "GetBan other guild", err, store.ErrNotFound)
		list := func(before, after snowflake.ID, limit int) []snowflake.ID {
			bs, err := s.ListBans(ctx, g, before, after, limit)
			noErr(t, "ListBans", err)
			var out []snowflake.ID
			for _, b := range bs {
				out = append(out, b.UserID)
			}
			return out
		}
		equalIDs(t, "all bans", list(0, 0, 100), users)
		equalIDs(t, "after", list(0, users[1], 2), users[2:4])
		equalIDs(t, "before", list(users[3], 0, 2), users[1:3])
		noErr(t, "DeleteBan", s.DeleteBan(ctx, g, users[0]))
		wantErr(t, "DeleteBan again", s.DeleteBan(ctx, g, users[0]), store.ErrNotFound)
		equalIDs(t, "after delete", list(0, 0, 100), users[1:])
	})

	t.Run("AuditLog", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		g := rid()
		now := time.Now()
		var ids []snowflake.ID
		for i := range 6 {
			id := snowflake.FromTime(now.Add(time.Duration(i-10)*time.Second)) | snowflake.ID(i)
			ids = append(ids, id)
			e := store.AuditEntry{ID: id, GuildID: g, UserID: snowflake.ID(1 + i%2), TargetID: 9, ActionType: 20 + i%3, Reason: "r", Changes: `[{"key":"nick"}]`}
			noErr(t, "AppendAudit", s.AppendAudit(ctx, e))
		}
		// A stale entry (past the retention) is not listed.
		old := snowflake.FromTime(now.Add(-store.AuditRetention - time.Hour))
		noErr(t, "AppendAudit old", s.AppendAudit(ctx, store.AuditEntry{ID: old, GuildID: g, UserID: 1, ActionType: 20}))
		list := func(q store.AuditQuery) []snowflake.ID {
			if q.Limit == 0 {
				q.Limit = 50
			}
			es, err := s.ListAudit(ctx, g, q)
			noErr(t, "ListAudit", err)
			var out []snowflake.ID
			for _, e := range es {
				out = append(out, e.ID)
			}
			return out
		}
		rev := slices.Clone(ids)
		slices.Reverse(rev)
		equalIDs(t, "all, newest first", list(store.AuditQuery{}), rev)
		equalIDs(t, "by user", list(store.AuditQuery{UserID: 2}), []snowflake.ID{ids[5], ids[3], ids[1]})
		equalIDs(t, "by action", list(store.AuditQuery{ActionType: 20}), []snowflake.ID{ids[3], ids[0]})
		equalIDs(t, "before", list(store.AuditQuery{Before: ids[3], Limit: 2}), []snowflake.ID{ids[2], ids[1]})
		equalIDs(t, "after", list(store.AuditQuery{After: ids[1], Limit: 2}), []snowflake.ID{ids[3], ids[2]})
		es, err := s.ListAudit(ctx, g, store.AuditQuery{Limit: 1})
		noErr(t, "ListAudit", err)
		if len(es) != 1 || es[0].Changes != `[{"key":"nick"}]` || es[0].Reason != "r" || es[0].TargetID != 9 {
			t.Fatalf("entry = %+v", es)
		}
	})
}
