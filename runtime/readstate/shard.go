package readstate

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/snowflake"
)

// Mention is one user mention the mention consumer counts: the mentioned
// user, the channel and message, and the event log offset of the event
// in the channel's partition. (User, Channel, Offset) is the idempotence
// key: a record holding NextOffset > Offset already counts it.
type Mention struct {
	User    snowflake.ID
	Channel snowflake.ID
	Message snowflake.ID
	Offset  int64
	// Removed is the deletion of a message that mentioned User: the
	// count goes down (never below zero) instead of up, once per offset
	// like an increment.
	Removed bool
}

// Mentions takes the user mentions the consumer counted and hands each to
// the node owning its user (read states are sharded by user; the consumer
// is partitioned by channel). AddMentions returns only once every mention
// is durable on its owner, so the consumer may then mark the offsets: a
// redelivery after a crash is recognised by the owner's record. Nil in
// Config means every user is owned by this service (Service.AddMentions).
type Mentions interface {
	AddMentions(ctx context.Context, ms []Mention) error
}

// AddMentions counts mentions of users this service owns and writes the
// changed records through to the store before returning, so that the
// count survives this node's death and a later owner loads it. A mention
// whose record already holds its offset is skipped (a redelivery, or the
// same hand-off retried after a lost answer).
func (s *Service) AddMentions(ctx context.Context, ms []Mention) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ms) == 0 {
		return nil
	}
	// Under the flush lock, so this write and Flush's never reorder two
	// copies of one record.
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	recs := make([]Record, 0, len(ms))
	for _, m := range ms {
		err := s.users.do(ctx, m.User, s.loadUser(m.User), func(e *userEntry) {
			rec := e.record(m.Channel)
			if m.Offset < rec.NextOffset {
				s.m.duplicates.Inc()
				s.m.nDuplicates.Add(1)
				return
			}
			rec.NextOffset = m.Offset + 1
			if m.Removed {
				if m.Message > rec.LastReadID && rec.MentionCount > 0 {
					rec.MentionCount--
				}
			} else if m.Message > rec.LastReadID {
				rec.MentionCount++
				s.m.mentions.Inc()
				s.m.nMentions.Add(1)
			}
			// Still dirty: the next Flush writes it again, which is
			// harmless, and it cannot be evicted before this write.
			e.dirty[m.Channel] = true
			recs = append(recs, *rec)
		})
		if err != nil {
			return err
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if err := s.store.Write(ctx, recs, nil); err != nil {
		return fmt.Errorf("%w: write %d mentions: %v", ErrStore, len(recs), err)
	}
	s.m.written.Add(float64(len(recs)))
	s.m.nWritten.Add(int64(len(recs)))
	return nil
}

// Release hands back the users this service no longer owns (owned
// reports false), after the ring of read-state nodes changed: it writes
// every change and forgets their cached records, so that a later owner
// loads what this node wrote and this node, should the users come back,
// loads what the other owner wrote. Callers reject calls for users they
// do not own before calling Release.
func (s *Service) Release(ctx context.Context, owned func(user snowflake.ID) bool) error {
	drop := func(u snowflake.ID) bool { return !owned(u) }
	for range 3 {
		if err := s.Flush(ctx); err != nil {
			return err
		}
		// A change that raced the flush stays cached; flush again.
		if s.users.dropCleanIf(drop) == 0 {
			return nil
		}
	}
	return fmt.Errorf("readstate: release: records of released users still changing")
}
