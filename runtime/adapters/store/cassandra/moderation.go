package cassandra

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Reactions, pins, bans and the audit log (migration 4). Adding and
// removing one reaction, and pinning, are lightweight transactions so the
// caller learns whether anything changed (the API fires an event only
// then). Audit entries expire through the table's default TTL, Discord's
// 45 days.

func reactionBucket(msg snowflake.ID) int64 { return store.Bucket(msg, store.DefaultBucketWidth) }

// AddReaction implements store.Reactions.
func (s *Store) AddReaction(ctx context.Context, ch, msg snowflake.ID, emoji string, user snowflake.ID) (bool, error) {
	applied, err := s.session.Query(`INSERT INTO reactions (channel_id, bucket, message_id, emoji, user_id, reacted_at)
		VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`, int64(ch), reactionBucket(msg), int64(msg), emoji, int64(user), time.Now()).
		MapScanCASContext(ctx, map[string]any{})
	return applied, wrapErr("add reaction", err)
}

// RemoveReaction implements store.Reactions.
func (s *Store) RemoveReaction(ctx context.Context, ch, msg snowflake.ID, emoji string, user snowflake.ID) (bool, error) {
	applied, err := s.session.Query(`DELETE FROM reactions WHERE channel_id = ? AND bucket = ? AND message_id = ? AND emoji = ? AND user_id = ? IF EXISTS`,
		int64(ch), reactionBucket(msg), int64(msg), emoji, int64(user)).MapScanCASContext(ctx, map[string]any{})
	return applied, wrapErr("remove reaction", err)
}

// RemoveReactions implements store.Reactions.
func (s *Store) RemoveReactions(ctx context.Context, ch, msg snowflake.ID, emoji string) error {
	if emoji == "" {
		return wrapErr("remove reactions", s.session.Query(`DELETE FROM reactions WHERE channel_id = ? AND bucket = ? AND message_id = ?`,
			int64(ch), reactionBucket(msg), int64(msg)).ExecContext(ctx))
	}
	return wrapErr("remove reactions", s.session.Query(`DELETE FROM reactions WHERE channel_id = ? AND bucket = ? AND message_id = ? AND emoji = ?`,
		int64(ch), reactionBucket(msg), int64(msg), emoji).ExecContext(ctx))
}

// ReactionUsers implements store.Reactions.
func (s *Store) ReactionUsers(ctx context.Context, ch, msg snowflake.ID, emoji string, after snowflake.ID, limit int) ([]snowflake.ID, error) {
	iter := s.session.Query(`SELECT user_id FROM reactions WHERE channel_id = ? AND bucket = ? AND message_id = ? AND emoji = ? AND user_id > ? LIMIT ?`,
		int64(ch), reactionBucket(msg), int64(msg), emoji, int64(after), limit).IterContext(ctx)
	var out []snowflake.ID
	var u int64
	for iter.Scan(&u) {
		// user_id is a signed column; ids above 2^63 do not occur in
		// Concord (snowflakes stay below it until 2084).
		out = append(out, snowflake.ID(u))
	}
	return out, wrapErr("reaction users", iter.Close())
}

// CountReactions implements store.Reactions.
func (s *Store) CountReactions(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, viewer snowflake.ID) (map[snowflake.ID][]store.ReactionCount, error) {
	byBucket := map[int64][]int64{}
	for _, id := range ids {
		b := reactionBucket(id)
		byBucket[b] = append(byBucket[b], int64(id))
	}
	type agg struct {
		c     store.ReactionCount
		first time.Time
	}
	lists := map[snowflake.ID][]*agg{}
	index := map[snowflake.ID]map[string]*agg{}
	for b, msgs := range byBucket {
		iter := s.session.Query(`SELECT message_id, emoji, user_id, reacted_at FROM reactions WHERE channel_id = ? AND bucket = ? AND message_id IN ?`,
			int64(ch), b, msgs).IterContext(ctx)
		var mid, uid int64
		var emoji string
		var at time.Time
		for iter.Scan(&mid, &emoji, &uid, &at) {
			m := snowflake.ID(mid)
			if index[m] == nil {
				index[m] = map[string]*agg{}
			}
			a := index[m][emoji]
			if a == nil {
				a = &agg{c: store.ReactionCount{Emoji: emoji}, first: at}
				index[m][emoji] = a
				lists[m] = append(lists[m], a)
			}
			a.c.Count++
			a.c.Me = a.c.Me || snowflake.ID(uid) == viewer
			if at.Before(a.first) {
				a.first = at
			}
		}
		if err := iter.Close(); err != nil {
			return nil, wrapErr("count reactions", err)
		}
	}
	out := make(map[snowflake.ID][]store.ReactionCount, len(lists))
	for m, list := range lists {
		slices.SortStableFunc(list, func(x, y *agg) int { return x.first.Compare(y.first) })
		counts := make([]store.ReactionCount, len(list))
		for i, a := range list {
			counts[i] = a.c
		}
		out[m] = counts
	}
	return out, nil
}

// PinMessage implements store.Pins.
func (s *Store) PinMessage(ctx context.Context, ch, msg snowflake.ID, at time.Time) (bool, error) {
	applied, err := s.session.Query(`INSERT INTO pins (channel_id, message_id, pinned_at) VALUES (?, ?, ?) IF NOT EXISTS`,
		int64(ch), int64(msg), at).MapScanCASContext(ctx, map[string]any{})
	return applied, wrapErr("pin message", err)
}

// UnpinMessage implements store.Pins.
func (s *Store) UnpinMessage(ctx context.Context, ch, msg snowflake.ID) (bool, error) {
	applied, err := s.session.Query(`DELETE FROM pins WHERE channel_id = ? AND message_id = ? IF EXISTS`,
		int64(ch), int64(msg)).MapScanCASContext(ctx, map[string]any{})
	return applied, wrapErr("unpin message", err)
}

// ListPins implements store.Pins.
func (s *Store) ListPins(ctx context.Context, ch snowflake.ID) ([]store.Pin, error) {
	iter := s.session.Query(`SELECT message_id, pinned_at FROM pins WHERE channel_id = ?`, int64(ch)).IterContext(ctx)
	var out []store.Pin
	var mid int64
	var at time.Time
	for iter.Scan(&mid, &at) {
		out = append(out, store.Pin{MessageID: snowflake.ID(mid), PinnedAt: at.UTC()})
	}
	if err := iter.Close(); err != nil {
		return nil, wrapErr("list pins", err)
	}
	slices.SortFunc(out, func(x, y store.Pin) int {
		if c := y.PinnedAt.Compare(x.PinnedAt); c != 0 {
			return c
		}
		switch {
		case x.MessageID > y.MessageID:
			return -1
		case x.MessageID < y.MessageID:
			return 1
		}
		return 0
	})
	return out, nil
}

// PutBan implements store.Bans.
func (s *Store) PutBan(ctx context.Context, b store.Ban) error {
	doc, err := encodeDoc(b)
	if err != nil {
		return err
	}
	return wrapErr("put ban", s.session.Query(`INSERT INTO bans (guild_id, user_id, doc) VALUES (?, ?, ?)`,
		int64(b.GuildID), int64(b.UserID), doc).Idempotent(true).ExecContext(ctx))
}

// GetBan implements store.Bans.
func (s *Store) GetBan(ctx context.Context, guildID, userID snowflake.ID) (store.Ban, error) {
	var b store.Ban
	err := s.getDoc(ctx, fmt.Sprintf("ban %v in guild %v", userID, guildID), &b,
		`SELECT doc FROM bans WHERE guild_id = ? AND user_id = ?`, int64(guildID), int64(userID))
	return b, err
}

// DeleteBan implements store.Bans.
func (s *Store) DeleteBan(ctx context.Context, guildID, userID snowflake.ID) error {
	if _, err := s.GetBan(ctx, guildID, userID); err != nil {
		return err
	}
	return wrapErr("delete ban", s.session.Query(`DELETE FROM bans WHERE guild_id = ? AND user_id = ?`,
		int64(guildID), int64(userID)).Idempotent(true).ExecContext(ctx))
}

// ListBans implements store.Bans.
func (s *Store) ListBans(ctx context.Context, guildID, before, after snowflake.ID, limit int) ([]store.Ban, error) {
	var out []store.Ban
	collect := func(doc string) error {
		var b store.Ban
		if err := decodeDoc(doc, &b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	}
	var err error
	if before != 0 {
		err = s.scanDocs(ctx, "bans", collect, `SELECT doc FROM bans WHERE guild_id = ? AND user_id > ? AND user_id < ?
			ORDER BY user_id DESC LIMIT ?`, int64(guildID), int64(after), int64(before), limit)
		slices.Reverse(out)
	} else {
		err = s.scanDocs(ctx, "bans", collect, `SELECT doc FROM bans WHERE guild_id = ? AND user_id > ? LIMIT ?`,
			int64(guildID), int64(after), limit)
	}
	return out, err
}

// AppendAudit implements store.AuditLog.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	doc, err := encodeDoc(e)
	if err != nil {
		return err
	}
	return wrapErr("append audit entry", s.session.Query(`INSERT INTO audit_log (guild_id, entry_id, doc) VALUES (?, ?, ?)`,
		int64(e.GuildID), int64(e.ID), doc).Idempotent(true).ExecContext(ctx))
}

// ListAudit implements store.AuditLog: it pages through the guild's log
// newest first (or, with After, oldest first from the cursor) and filters
// by user and action type, reading at most a few thousand entries.
func (s *Store) ListAudit(ctx context.Context, guildID snowflake.ID, q store.AuditQuery) ([]store.AuditEntry, error) {
	stmt, args := `SELECT doc FROM audit_log WHERE guild_id = ?`, []any{int64(guildID)}
	forward := true
	switch {
	case q.Before != 0:
		stmt, args = stmt+` AND entry_id < ?`, append(args, int64(q.Before))
	case q.After != 0:
		stmt, args = stmt+` AND entry_id > ? ORDER BY entry_id ASC`, append(args, int64(q.After))
		forward = false
	}
	cutoff := time.Now().Add(-store.AuditRetention)
	iter := s.session.Query(stmt, args...).PageSize(200).IterContext(ctx)
	var out []store.AuditEntry
	var doc string
	for scanned := 0; len(out) < q.Limit && scanned < 5000 && iter.Scan(&doc); scanned++ {
		var e store.AuditEntry
		if err := decodeDoc(doc, &e); err != nil {
			iter.Close()
			return nil, err
		}
		if e.ID.Time().Before(cutoff) {
			// Older than the retention (the TTL counts from the write;
			// this bound counts from the action).
			if forward {
				break
			}
			continue
		}
		if (q.UserID == 0 || e.UserID == q.UserID) && (q.ActionType == 0 || e.ActionType == q.ActionType) {
			out = append(out, e)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, wrapErr("list audit log", err)
	}
	if !forward {
		slices.Reverse(out)
	}
	return out, nil
}

// dropMessageExtras deletes the reactions and pins of deleted messages.
func (s *Store) dropMessageExtras(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	byBucket := map[int64][]int64{}
	for _, id := range ids {
		b := reactionBucket(id)
		byBucket[b] = append(byBucket[b], int64(id))
	}
	for b, msgs := range byBucket {
		if err := s.session.Query(`DELETE FROM reactions WHERE channel_id = ? AND bucket = ? AND message_id IN ?`,
			int64(ch), b, msgs).Idempotent(true).ExecContext(ctx); err != nil {
			return wrapErr("delete reactions of deleted messages", err)
		}
	}
	return wrapErr("unpin deleted messages", s.session.Query(`DELETE FROM pins WHERE channel_id = ? AND message_id IN ?`,
		int64(ch), ids64(ids)).Idempotent(true).ExecContext(ctx))
}
