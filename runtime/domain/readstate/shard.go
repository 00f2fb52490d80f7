package readstate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
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
// same hand-off retried after a lost answer), and so is a second copy of
// a counted message (the record's Mentions). A removal lowers the count
// only when the record counts the message, and takes it out. ErrNotOwner
// means another owner holds a user (Config.Owns, or a later claim in the
// store); nothing is lost, as the hand-off is retried on the owner.
func (s *Service) AddMentions(ctx context.Context, ms []Mention) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ms) == 0 {
		return nil
	}
	err := s.addMentions(ctx, ms)
	if errors.Is(err, errFencedWrite) {
		// The fenced users' entries are dropped: once more claims at the
		// current epoch and reloads (the others' records skip their
		// offsets as already applied).
		err = s.addMentions(ctx, ms)
	}
	return err
}

func (s *Service) addMentions(ctx context.Context, ms []Mention) error {
	keys := make([]recKey, 0, len(ms))
	for _, m := range ms {
		err := s.mutate(ctx, m.User, func(e *userEntry) {
			rec := e.record(m.Channel)
			changed, counted, dup := applyMention(rec, m)
			if dup {
				s.m.duplicates.Inc()
				s.m.nDuplicates.Add(1)
			}
			if counted {
				s.m.mentions.Inc()
				s.m.nMentions.Add(1)
			}
			if changed {
				e.dirty[m.Channel] = true
			}
		})
		if err != nil {
			return err
		}
		// Also when skipped: a record left dirty by a failed write is
		// written now, before the consumer may mark the offset.
		keys = append(keys, recKey{m.User, m.Channel})
	}
	return s.commit(ctx, keys)
}

// applyMention applies m to rec and reports whether rec changed, whether
// a mention was counted, and whether m was a duplicate (its offset
// applied already, or its message counted already). Slices are replaced,
// never changed in place: a write may be encoding the previous one.
func applyMention(rec *Record, m Mention) (changed, counted, dup bool) {
	if m.Offset < rec.NextOffset {
		return false, false, true
	}
	rec.NextOffset = m.Offset + 1
	i, found := slices.BinarySearch(rec.Mentions, m.Message)
	switch {
	case m.Removed:
		if found {
			rec.Mentions = slices.Delete(slices.Clone(rec.Mentions), i, i+1)
			if rec.MentionCount > 0 {
				rec.MentionCount--
			}
		}
		return true, false, false
	case m.Message <= rec.LastReadID:
		return true, false, false // read already
	case found:
		return true, false, true // the message published twice
	}
	ids := slices.Insert(slices.Clone(rec.Mentions), i, m.Message)
	if n := len(ids) - MaxMentionIDs; n > 0 {
		ids = ids[n:]
	}
	rec.Mentions = ids
	rec.MentionCount++
	return true, true, false
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
