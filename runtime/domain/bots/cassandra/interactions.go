package cassandra

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
)

// Interactions. Each lives in bot_interactions with a version tag, a
// random non-zero number replaced by every write, and expires
// Config.InteractionTTL after its creation (updates keep the remaining
// TTL). For DeleteInteractionsBefore, bot_interactions_by_minute lists the
// ids of each minute of id time (with the same TTL), and
// bot_interaction_minutes the minutes that may hold any (one small
// partition, rewritten by each process at most every InteractionTTL/2 per
// minute, with twice the TTL so it outlives every id it lists).

// minuteOf is the minute (of Unix time) of an id's timestamp.
func minuteOf(v snowflake.ID) int64 { return v.Time().UnixMilli() / 60_000 }

// newTag returns a fresh version tag.
func newTag() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// CreateInteraction indexes the interaction's minute, then inserts it with
// IF NOT EXISTS: an index entry without its interaction is harmless (it
// expires), an interaction without its index entry never exists.
func (s *Store) CreateInteraction(ctx context.Context, in bots.Interaction) error {
	doc, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("bots cassandra: encode interaction %d: %w", in.ID, err)
	}
	return s.op(ctx, func() error {
		minute := minuteOf(in.ID)
		if now := time.Now(); s.minutes.due(minute, now, s.cfg.InteractionTTL/2) {
			if err := s.session.Query(`INSERT INTO bot_interaction_minutes (shard, minute) VALUES (0, ?) USING TTL ?`,
				minute, 2*s.ttl).ExecContext(ctx); err != nil {
				return wrapErr(fmt.Sprintf("index minute of interaction %d", in.ID), err)
			}
			s.minutes.note(minute, now)
		}
		if err := s.session.Query(`INSERT INTO bot_interactions_by_minute (minute, interaction_id) VALUES (?, ?)
			USING TTL ?`, minute, id(in.ID), s.ttl).ExecContext(ctx); err != nil {
			return wrapErr(fmt.Sprintf("index interaction %d", in.ID), err)
		}
		tag := newTag()
		applied, err := s.session.Query(`INSERT INTO bot_interactions (interaction_id, version, doc)
			VALUES (?, ?, ?) IF NOT EXISTS USING TTL ?`, id(in.ID), tag, string(doc), s.ttl).
			MapScanCASContext(ctx, map[string]any{})
		if err != nil {
			// The outcome may be unknown (a CAS timeout): ask.
			if cassandra.IsUnavailable(err) {
				if mine, rerr := s.hasTag(ctx, in.ID, tag); rerr == nil && mine {
					return nil
				}
			}
			return wrapErr(fmt.Sprintf("create interaction %d", in.ID), err)
		}
		if !applied {
			return fmt.Errorf("bots cassandra: interaction %d: %w", in.ID, bots.ErrExists)
		}
		return nil
	})
}

// GetInteraction loads an interaction.
func (s *Store) GetInteraction(ctx context.Context, iid snowflake.ID) (bots.Interaction, error) {
	var in bots.Interaction
	err := s.op(ctx, func() error {
		var err error
		in, _, _, err = s.readInteraction(ctx, iid)
		return err
	})
	if err != nil {
		return bots.Interaction{}, err
	}
	return in, nil
}

// readInteraction loads an interaction with its version tag and remaining
// TTL in seconds (0: none).
func (s *Store) readInteraction(ctx context.Context, iid snowflake.ID) (bots.Interaction, int64, int, error) {
	var (
		in  bots.Interaction
		tag int64
		doc string
		ttl int
	)
	err := s.session.Query(`SELECT version, doc, TTL(doc) FROM bot_interactions WHERE interaction_id = ?`, id(iid)).
		ScanContext(ctx, &tag, &doc, &ttl)
	if err != nil {
		return in, 0, 0, wrapErr(fmt.Sprintf("interaction %d", iid), err)
	}
	if err := json.Unmarshal([]byte(doc), &in); err != nil {
		return in, 0, 0, fmt.Errorf("bots cassandra: decode interaction %d: %w", iid, err)
	}
	return in, tag, ttl, nil
}

// hasTag reports, with a LOCAL_SERIAL read (which settles any Paxos round
// in progress), whether the interaction's version tag is tag: whether a
// write whose outcome was unknown took effect.
func (s *Store) hasTag(ctx context.Context, iid snowflake.ID, tag int64) (bool, error) {
	var cur int64
	err := s.session.Query(`SELECT version FROM bot_interactions WHERE interaction_id = ?`, id(iid)).
		Consistency(gocql.LocalSerial).ScanContext(ctx, &cur)
	if err != nil {
		return false, err
	}
	return cur == tag, nil
}

// UpdateInteraction reads the interaction, applies fn and writes the
// result with a compare-and-set on its version tag, retrying (with a short
// random pause) while another process's update wins the race, at most
// Config.MaxUpdateAttempts times. This process's updates of one id take
// turns, so fn runs once per call unless another process updates the same
// interaction concurrently: then fn runs again on the newer record, and it
// must therefore change nothing but its argument. A write whose outcome
// the cluster could not report (a CAS timeout) is settled with a serial
// read before anything is retried, so an update is never applied twice.
func (s *Store) UpdateInteraction(ctx context.Context, iid snowflake.ID, fn func(*bots.Interaction) error) (bots.Interaction, error) {
	var out bots.Interaction
	err := s.op(ctx, func() error {
		defer s.updates.lock(iid)()
		for attempt := 1; ; attempt++ {
			in, tag, ttl, err := s.readInteraction(ctx, iid)
			if err != nil {
				return err
			}
			if err := fn(&in); err != nil {
				return err
			}
			in.ID = iid
			doc, err := json.Marshal(in)
			if err != nil {
				return fmt.Errorf("bots cassandra: encode interaction %d: %w", iid, err)
			}
			next := newTag()
			var cur int64
			applied, err := s.session.Query(`UPDATE bot_interactions USING TTL ? SET version = ?, doc = ?
				WHERE interaction_id = ? IF version = ?`, ttl, next, string(doc), id(iid), tag).
				ScanCASContext(ctx, &cur)
			switch {
			case err != nil:
				if !cassandra.IsUnavailable(err) {
					return wrapErr(fmt.Sprintf("update interaction %d", iid), err)
				}
				// The outcome may be unknown (a CAS timeout): ask.
				mine, rerr := s.hasTag(ctx, iid, next)
				if rerr != nil {
					return wrapErr(fmt.Sprintf("update interaction %d", iid), err)
				}
				applied = mine
			case !applied && cur == next:
				// The driver retried a write that had succeeded.
				applied = true
			}
			if applied {
				out = in
				return nil
			}
			if attempt >= s.cfg.MaxUpdateAttempts {
				return fmt.Errorf("bots cassandra: update interaction %d: %w: lost %d compare-and-set races",
					iid, bots.ErrUnavailable, attempt)
			}
			pause := time.Duration(rand.IntN(min(attempt, 10)*2+1)) * time.Millisecond
			select {
			case <-ctx.Done():
				return wrapErr(fmt.Sprintf("update interaction %d", iid), ctx.Err())
			case <-time.After(pause):
			}
		}
	})
	if err != nil {
		return bots.Interaction{}, err
	}
	return out, nil
}

// DeleteInteractionsBefore deletes, minute by minute of id time, the
// interactions below cutoff that the minute index lists, each with a
// conditional delete (so concurrent sweepers count each once), then the
// emptied index entries. It returns how many interactions it deleted;
// interactions whose TTL ran out first are not counted.
func (s *Store) DeleteInteractionsBefore(ctx context.Context, cutoff snowflake.ID) (int, error) {
	n := 0
	err := s.op(ctx, func() error {
		last := minuteOf(cutoff)
		var minutes []int64
		iter := s.session.Query(`SELECT minute FROM bot_interaction_minutes WHERE shard = 0 AND minute <= ?`, last).
			IterContext(ctx)
		var m int64
		for iter.Scan(&m) {
			minutes = append(minutes, m)
		}
		if err := iter.Close(); err != nil {
			return wrapErr("list interaction minutes", err)
		}
		for _, m := range minutes {
			k, err := s.sweepMinute(ctx, m, cutoff, m < last)
			n += k
			if err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// sweepMinute deletes minute m's interactions below cutoff; whole says
// the minute lies entirely below cutoff, so its index goes too.
func (s *Store) sweepMinute(ctx context.Context, m int64, cutoff snowflake.ID, whole bool) (int, error) {
	var ids []int64
	iter := s.session.Query(`SELECT interaction_id FROM bot_interactions_by_minute WHERE minute = ? AND interaction_id < ?`,
		m, id(cutoff)).IterContext(ctx)
	var v int64
	for iter.Scan(&v) {
		ids = append(ids, v)
	}
	if err := iter.Close(); err != nil {
		return 0, wrapErr(fmt.Sprintf("list interactions of minute %d", m), err)
	}
	n := 0
	for _, v := range ids {
		applied, err := s.session.Query(`DELETE FROM bot_interactions WHERE interaction_id = ? IF EXISTS`, v).
			MapScanCASContext(ctx, map[string]any{})
		if err != nil {
			return n, wrapErr(fmt.Sprintf("delete interaction %d", v), err)
		}
		if applied {
			n++
		}
	}
	if !whole {
		if len(ids) == 0 {
			return n, nil
		}
		return n, wrapErr(fmt.Sprintf("unindex interactions of minute %d", m), s.session.Query(
			`DELETE FROM bot_interactions_by_minute WHERE minute = ? AND interaction_id < ?`, m, id(cutoff)).ExecContext(ctx))
	}
	if err := s.session.Query(`DELETE FROM bot_interactions_by_minute WHERE minute = ?`, m).ExecContext(ctx); err != nil {
		return n, wrapErr(fmt.Sprintf("unindex minute %d", m), err)
	}
	s.minutes.forget(m)
	return n, wrapErr(fmt.Sprintf("drop minute %d", m), s.session.Query(
		`DELETE FROM bot_interaction_minutes WHERE shard = 0 AND minute = ?`, m).ExecContext(ctx))
}

// minuteCache remembers when this process last recorded each minute in
// bot_interaction_minutes, so that it writes that partition once per
// minute and refresh period rather than once per interaction.
type minuteCache struct {
	mu   sync.Mutex
	last map[int64]time.Time
}

func (c *minuteCache) init() { c.last = map[int64]time.Time{} }

// due reports whether minute m was not recorded within refresh of now.
func (c *minuteCache) due(m int64, now time.Time, refresh time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.last[m]
	return !ok || now.Sub(t) >= refresh
}

// note records that minute m was written at now, and forgets minutes not
// written for an hour.
func (c *minuteCache) note(m int64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[m] = now
	if len(c.last) > 64 {
		for k, t := range c.last {
			if now.Sub(t) > time.Hour {
				delete(c.last, k)
			}
		}
	}
}

// forget drops minute m, which a sweep removed from the table.
func (c *minuteCache) forget(m int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, m)
}
