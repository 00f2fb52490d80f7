package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Reactions, pins, bans and audit log entries (keys.go lists the tags):
//
//	'x' channel message emoji 0x00 user -> reacted at (unix ns, 8 bytes)
//	'P' channel message                 -> pinned at (unix ns, 8 bytes)
//	'B' guild user                      -> ban (JSON)
//	'A' guild id^                       -> audit entry (JSON), newest first
//
// Emoji keys never hold a zero byte (the API validates them), so the zero
// ends the emoji and one emoji's reactions are one key prefix.

func reactionPrefix(ch, msg snowflake.ID, emoji string) []byte {
	k := key2(tagReaction, ch, msg)
	if emoji == "" {
		return k
	}
	return append(append(k, emoji...), 0)
}

func reactionKey(ch, msg snowflake.ID, emoji string, user snowflake.ID) []byte {
	return appendU64(reactionPrefix(ch, msg, emoji), uint64(user))
}

func unixNano(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())) }

func fromUnixNano(v []byte) time.Time {
	if len(v) != 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
}

// AddReaction implements store.Reactions.
func (s *Store) AddReaction(ctx context.Context, ch, msg snowflake.ID, emoji string, user snowflake.ID) (bool, error) {
	return s.setReaction(ctx, ch, msg, emoji, user, true)
}

// RemoveReaction implements store.Reactions.
func (s *Store) RemoveReaction(ctx context.Context, ch, msg snowflake.ID, emoji string, user snowflake.ID) (bool, error) {
	return s.setReaction(ctx, ch, msg, emoji, user, false)
}

// setReaction makes user's reaction present or absent, reporting whether
// that changed anything. The channel lock makes the check and the write
// one step, so a double add reports false once.
func (s *Store) setReaction(ctx context.Context, ch, msg snowflake.ID, emoji string, user snowflake.ID, present bool) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	defer s.end()
	l := s.chLock(ch)
	l.Lock()
	defer l.Unlock()
	k := reactionKey(ch, msg, emoji, user)
	ok, err := s.exists(k)
	if err != nil || ok == present {
		return false, err
	}
	b := s.db.NewBatch()
	if present {
		_ = b.Set(k, unixNano(time.Now()), nil)
		return true, s.commit(b, "add reaction")
	}
	_ = b.Delete(k, nil)
	return true, s.commit(b, "remove reaction")
}

// RemoveReactions implements store.Reactions.
func (s *Store) RemoveReactions(ctx context.Context, ch, msg snowflake.ID, emoji string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	p := reactionPrefix(ch, msg, emoji)
	b := s.db.NewBatch()
	_ = b.DeleteRange(p, prefixEnd(p), nil)
	return s.commit(b, "remove reactions")
}

// ReactionUsers implements store.Reactions.
func (s *Store) ReactionUsers(ctx context.Context, ch, msg snowflake.ID, emoji string, after snowflake.ID, limit int) ([]snowflake.ID, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	p := reactionPrefix(ch, msg, emoji)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: appendU64(slices.Clone(p), uint64(after)+1), UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, wrapErr("reaction users", err)
	}
	if after == ^snowflake.ID(0) {
		it.Close()
		return nil, nil
	}
	var out []snowflake.ID
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		out = append(out, snowflake.ID(binary.BigEndian.Uint64(k[len(k)-8:])))
	}
	if err := it.Close(); err != nil {
		return nil, wrapErr("reaction users", err)
	}
	return out, nil
}

// CountReactions implements store.Reactions.
func (s *Store) CountReactions(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, viewer snowflake.ID) (map[snowflake.ID][]store.ReactionCount, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	out := make(map[snowflake.ID][]store.ReactionCount)
	for _, id := range ids {
		type agg struct {
			c     store.ReactionCount
			first time.Time
		}
		var list []*agg
		byEmoji := map[string]*agg{}
		p := reactionPrefix(ch, id, "")
		err := s.scan(p, func(k, v []byte) error {
			rest := k[len(p):]
			i := bytes.IndexByte(rest, 0)
			if i < 0 || len(rest) != i+9 {
				return fmt.Errorf("%w: reaction key", errCorrupt)
			}
			emoji := string(rest[:i])
			user := snowflake.ID(binary.BigEndian.Uint64(rest[i+1:]))
			a := byEmoji[emoji]
			if a == nil {
				a = &agg{c: store.ReactionCount{Emoji: emoji}, first: fromUnixNano(v)}
				byEmoji[emoji] = a
				list = append(list, a)
			}
			a.c.Count++
			a.c.Me = a.c.Me || user == viewer
			if t := fromUnixNano(v); t.Before(a.first) {
				a.first = t
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			continue
		}
		slices.SortStableFunc(list, func(x, y *agg) int { return x.first.Compare(y.first) })
		counts := make([]store.ReactionCount, len(list))
		for i, a := range list {
			counts[i] = a.c
		}
		out[id] = counts
	}
	return out, nil
}

// PinMessage implements store.Pins.
func (s *Store) PinMessage(ctx context.Context, ch, msg snowflake.ID, at time.Time) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	defer s.end()
	l := s.chLock(ch)
	l.Lock()
	defer l.Unlock()
	k := key2(tagPin, ch, msg)
	ok, err := s.exists(k)
	if err != nil || ok {
		return false, err
	}
	b := s.db.NewBatch()
	_ = b.Set(k, unixNano(at), nil)
	return true, s.commit(b, "pin message")
}

// UnpinMessage implements store.Pins.
func (s *Store) UnpinMessage(ctx context.Context, ch, msg snowflake.ID) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	defer s.end()
	l := s.chLock(ch)
	l.Lock()
	defer l.Unlock()
	k := key2(tagPin, ch, msg)
	ok, err := s.exists(k)
	if err != nil || !ok {
		return false, err
	}
	b := s.db.NewBatch()
	_ = b.Delete(k, nil)
	return true, s.commit(b, "unpin message")
}

// ListPins implements store.Pins.
func (s *Store) ListPins(ctx context.Context, ch snowflake.ID) ([]store.Pin, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var out []store.Pin
	err := s.scan(key1(tagPin, ch), func(k, v []byte) error {
		out = append(out, store.Pin{MessageID: snowflake.ID(binary.BigEndian.Uint64(k[9:17])), PinnedAt: fromUnixNano(v)})
		return nil
	})
	sortPins(out)
	return out, err
}

func sortPins(ps []store.Pin) {
	slices.SortFunc(ps, func(x, y store.Pin) int {
		if c := y.PinnedAt.Compare(x.PinnedAt); c != 0 {
			return c
		}
		return cmpIDs(y.MessageID, x.MessageID)
	})
}

func cmpIDs(x, y snowflake.ID) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// PutBan implements store.Bans.
func (s *Store) PutBan(ctx context.Context, ban store.Ban) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	v, err := encodeJSON(ban)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Set(key2(tagBan, ban.GuildID, ban.UserID), v, nil)
	return s.commit(b, "put ban")
}

// GetBan implements store.Bans.
func (s *Store) GetBan(ctx context.Context, guildID, userID snowflake.ID) (store.Ban, error) {
	if err := s.begin(ctx); err != nil {
		return store.Ban{}, err
	}
	defer s.end()
	var out store.Ban
	err := s.get(key2(tagBan, guildID, userID), fmt.Sprintf("ban %v in guild %v", userID, guildID), func(v []byte) error {
		return decodeJSON(v, &out)
	})
	return out, err
}

// DeleteBan implements store.Bans.
func (s *Store) DeleteBan(ctx context.Context, guildID, userID snowflake.ID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	k := key2(tagBan, guildID, userID)
	ok, err := s.exists(k)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("ban %v in guild %v: %w", userID, guildID, store.ErrNotFound)
	}
	b := s.db.NewBatch()
	_ = b.Delete(k, nil)
	return s.commit(b, "delete ban")
}

// ListBans implements store.Bans.
func (s *Store) ListBans(ctx context.Context, guildID, before, after snowflake.ID, limit int) ([]store.Ban, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	upper := prefixEnd(key1(tagBan, guildID))
	if before != 0 {
		upper = key2(tagBan, guildID, before)
	}
	if after == ^snowflake.ID(0) {
		return nil, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: key2(tagBan, guildID, after+1), UpperBound: upper})
	if err != nil {
		return nil, wrapErr("list bans", err)
	}
	var out []store.Ban
	next := it.First
	step := it.Next
	if before != 0 {
		next, step = it.Last, it.Prev
	}
	for ok := next(); ok && len(out) < limit; ok = step() {
		var ban store.Ban
		if err := decodeJSON(it.Value(), &ban); err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, ban)
	}
	if err := it.Close(); err != nil {
		return nil, wrapErr("list bans", err)
	}
	if before != 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// AppendAudit implements store.AuditLog.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	v, err := encodeJSON(e)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Set(appendU64(key1(tagAudit, e.GuildID), ^uint64(e.ID)), v, nil)
	return s.commit(b, "append audit entry")
}

// ListAudit implements store.AuditLog. Entries past the retention are
// skipped. With After, the entries right after the cursor are returned
// (newest first), as history's After works.
func (s *Store) ListAudit(ctx context.Context, guildID snowflake.ID, q store.AuditQuery) ([]store.AuditEntry, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	p := key1(tagAudit, guildID)
	lower, upper := p, prefixEnd(p)
	cutoff := snowflake.ID(uint64(time.Now().Add(-store.AuditRetention).UnixMilli()-snowflake.Epoch) << 22)
	forward := true
	switch {
	case q.Before != 0:
		lower = appendU64(slices.Clone(p), ^uint64(q.Before)+1)
	case q.After != 0:
		upper = appendU64(slices.Clone(p), ^uint64(q.After))
		forward = false
	}
	if q.After > cutoff {
		cutoff = q.After
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, wrapErr("list audit log", err)
	}
	first, step := it.First, it.Next
	if !forward {
		first, step = it.Last, it.Prev
	}
	var out []store.AuditEntry
	for ok := first(); ok && len(out) < q.Limit; ok = step() {
		var e store.AuditEntry
		if err := decodeJSON(it.Value(), &e); err != nil {
			it.Close()
			return nil, err
		}
		if e.ID <= cutoff {
			if forward {
				break
			}
			continue
		}
		if (q.UserID == 0 || e.UserID == q.UserID) && (q.ActionType == 0 || e.ActionType == q.ActionType) {
			out = append(out, e)
		}
	}
	if err := it.Close(); err != nil {
		return nil, wrapErr("list audit log", err)
	}
	if !forward {
		slices.Reverse(out)
	}
	return out, nil
}
