package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Page size limits of ListMessages.
const (
	defaultLimit = 50
	maxLimit     = 100
)

// clampLimit maps a requested limit to 1..100; 0 means 50.
func clampLimit(n int) int {
	switch {
	case n == 0:
		return defaultLimit
	case n < 1:
		return 1
	case n > maxLimit:
		return maxLimit
	}
	return n
}

// PutMessage stores m (overwriting an existing row with the same id: an
// edit) and records its bucket in the channel's bucket index, atomically
// and durably.
func (s *Store) PutMessage(ctx context.Context, m store.Message) error {
	return s.putMessage(ctx, m, nil)
}

// PutMessageEvents implements store.MessageEvents: the message, its bucket
// entry and the outbox entries are one synced batch.
func (s *Store) PutMessageEvents(ctx context.Context, m store.Message, events ...store.Event) error {
	return s.putMessage(ctx, m, events)
}

func (s *Store) putMessage(ctx context.Context, m store.Message, events []store.Event) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if m.ChannelID == 0 || m.ID == 0 {
		return fmt.Errorf("pebble store: put message: channel and message id are required")
	}
	bucket := s.bucketOf(m.ChannelID, m.ID)
	b := s.db.NewBatch()
	if err := b.Set(messageKey(m.ChannelID, bucket, m.ID), encodeMessage(&m), nil); err != nil {
		b.Close()
		return wrapErr("put message", err)
	}
	if err := b.Set(bucketIndexKey(m.ChannelID, bucket), nil, nil); err != nil {
		b.Close()
		return wrapErr("put message", err)
	}
	if err := s.addOutbox(b, m.ChannelID, events); err != nil {
		b.Close()
		return wrapErr("put message", err)
	}
	l := s.chLock(m.ChannelID)
	l.RLock()
	defer l.RUnlock()
	return s.commit(b, "put message")
}

// GetMessage returns one message.
func (s *Store) GetMessage(ctx context.Context, channelID, messageID snowflake.ID) (store.Message, error) {
	if err := s.begin(ctx); err != nil {
		return store.Message{}, err
	}
	defer s.end()
	var m store.Message
	err := s.get(messageKey(channelID, s.bucketOf(channelID, messageID), messageID),
		fmt.Sprintf("message %v in channel %v", messageID, channelID),
		func(v []byte) (err error) { m, err = decodeMessage(v); return err })
	return m, err
}

// DeleteMessage removes one message; a missing message is ErrNotFound.
func (s *Store) DeleteMessage(ctx context.Context, channelID, messageID snowflake.ID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	l := s.chLock(channelID)
	l.Lock()
	defer l.Unlock()
	ok, err := s.exists(messageKey(channelID, s.bucketOf(channelID, messageID), messageID))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("message %v in channel %v: %w", messageID, channelID, store.ErrNotFound)
	}
	return s.deleteMessages(channelID, []snowflake.ID{messageID}, nil)
}

// DeleteMessages removes many messages of one channel in one durable
// batch; unknown ids are ignored. A bucket left without rows is dropped
// whole with a range deletion and leaves the bucket index.
func (s *Store) DeleteMessages(ctx context.Context, channelID snowflake.ID, ids []snowflake.ID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if len(ids) == 0 {
		return nil
	}
	l := s.chLock(channelID)
	l.Lock()
	defer l.Unlock()
	return s.deleteMessages(channelID, ids, nil)
}

// DeleteMessagesEvents implements store.MessageEvents: the deletions and
// the outbox entries are one synced batch.
func (s *Store) DeleteMessagesEvents(ctx context.Context, channelID snowflake.ID, ids []snowflake.ID, events ...store.Event) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if len(ids) == 0 && len(events) == 0 {
		return nil
	}
	l := s.chLock(channelID)
	l.Lock()
	defer l.Unlock()
	return s.deleteMessages(channelID, ids, events)
}

// deleteMessages runs with the channel lock held exclusively, so no put
// can land in a bucket between the emptiness check and the commit.
func (s *Store) deleteMessages(channelID snowflake.ID, ids []snowflake.ID, events []store.Event) error {
	b := s.db.NewIndexedBatch()
	if err := s.addOutbox(b, channelID, events); err != nil {
		b.Close()
		return wrapErr("delete messages", err)
	}
	buckets := make(map[int64]struct{})
	for _, id := range ids {
		bucket := s.bucketOf(channelID, id)
		buckets[bucket] = struct{}{}
		if err := b.Delete(messageKey(channelID, bucket, id), nil); err != nil {
			b.Close()
			return wrapErr("delete messages", err)
		}
		// A deleted message takes its reactions and pin with it.
		rp := reactionPrefix(channelID, id, "")
		if err := errors.Join(b.DeleteRange(rp, prefixEnd(rp), nil), b.Delete(key2(tagPin, channelID, id), nil)); err != nil {
			b.Close()
			return wrapErr("delete messages", err)
		}
	}
	for bucket := range buckets {
		p := bucketPrefix(channelID, bucket)
		end := prefixEnd(p)
		// The indexed batch reads through to the database, so this sees
		// the bucket as it will be after the commit.
		it, err := b.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: end})
		if err != nil {
			b.Close()
			return wrapErr("delete messages", err)
		}
		empty := !it.First()
		if err := it.Close(); err != nil {
			b.Close()
			return wrapErr("delete messages", err)
		}
		if !empty {
			continue
		}
		if err := b.DeleteRange(p, end, nil); err != nil {
			b.Close()
			return wrapErr("delete messages", err)
		}
		if err := b.Delete(bucketIndexKey(channelID, bucket), nil); err != nil {
			b.Close()
			return wrapErr("delete messages", err)
		}
	}
	return s.commit(b, "delete messages")
}

// Buckets lists the channel's non-empty buckets, newest first.
func (s *Store) Buckets(ctx context.Context, channelID snowflake.ID) ([]int64, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	var out []int64
	err := s.scan(key1(tagBucket, channelID), func(k, _ []byte) error {
		out = append(out, bucketIndexBucket(k))
		return nil
	})
	return out, err
}

// ListMessages returns a page of history, newest first.
//
//   - no cursor: the newest limit messages;
//   - Before: the limit messages right before the cursor (exclusive);
//   - After: the limit messages right after the cursor (exclusive);
//   - Around: limit messages centred on the cursor, the cursor's message
//     included when it exists: of the other limit-1 (limit if it does not
//     exist) slots, half (rounded down) go to newer messages and the rest to
//     older ones; near either end of the history the other side fills the
//     slots a side cannot.
//
// Around wins over Before and After; Before and After together bound a
// range (read from the After end). A zero cursor means "not set".
// Reads walk the bucket index, so empty buckets cost nothing.
func (s *Store) ListMessages(ctx context.Context, channelID snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	limit := clampLimit(q.Limit)
	r, err := s.newHistoryReader(channelID)
	if err != nil {
		return nil, err
	}
	defer r.close()

	if q.Around != 0 {
		return r.around(q.Around, limit)
	}
	var out []store.Message
	if q.After != 0 {
		out, err = r.ascending(q.After, q.Before, limit)
		slices.Reverse(out)
	} else {
		out, err = r.descending(q.Before, 0, limit)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// historyReader walks a channel's history bucket by bucket along the
// bucket index, under one consistent snapshot.
type historyReader struct {
	s       *Store
	ch      snowflake.ID
	snap    *pebble.Snapshot
	idx     *pebble.Iterator // bucket index of the channel
	msgs    *pebble.Iterator // messages of the channel
	idxBase []byte
}

func (s *Store) newHistoryReader(ch snowflake.ID) (*historyReader, error) {
	r := &historyReader{s: s, ch: ch, snap: s.db.NewSnapshot(), idxBase: key1(tagBucket, ch)}
	var err error
	r.idx, err = r.snap.NewIter(&pebble.IterOptions{LowerBound: r.idxBase, UpperBound: prefixEnd(r.idxBase)})
	if err != nil {
		r.close()
		return nil, wrapErr("list messages", err)
	}
	mp := key1(tagMessage, ch)
	r.msgs, err = r.snap.NewIter(&pebble.IterOptions{LowerBound: mp, UpperBound: prefixEnd(mp)})
	if err != nil {
		r.close()
		return nil, wrapErr("list messages", err)
	}
	return r, nil
}

func (r *historyReader) close() {
	if r.msgs != nil {
		r.msgs.Close()
	}
	if r.idx != nil {
		r.idx.Close()
	}
	r.snap.Close()
}

func (r *historyReader) iterErr() error {
	if err := r.idx.Error(); err != nil {
		return wrapErr("list messages", err)
	}
	if err := r.msgs.Error(); err != nil {
		return wrapErr("list messages", err)
	}
	return nil
}

// descending returns up to limit messages with lower < id < upper, newest
// first (upper 0: unbounded).
func (r *historyReader) descending(upper, lower snowflake.ID, limit int) ([]store.Message, error) {
	if upper == 1 || (upper != 0 && upper <= lower+1) {
		return nil, nil
	}
	var ok bool
	var start snowflake.ID // newest id to consider (inclusive)
	var startBucket int64
	if upper == 0 {
		ok = r.idx.First()
	} else {
		start = upper - 1
		startBucket = r.s.bucketOf(r.ch, start)
		ok = r.idx.SeekGE(bucketIndexKey(r.ch, startBucket))
	}
	out := make([]store.Message, 0, limit)
	// next: the message iterator already stands on the first key after
	// the previous bucket, which is where the next non-empty bucket starts;
	// no need to seek there.
	next := false
	for ; ok && len(out) < limit; ok = r.idx.Next() {
		bucket := bucketIndexBucket(r.idx.Key())
		p := bucketPrefix(r.ch, bucket)
		var mok bool
		switch {
		case upper != 0 && bucket == startBucket:
			mok = r.msgs.SeekGE(messageKey(r.ch, bucket, start))
		case next && bytes.HasPrefix(r.msgs.Key(), p):
			mok = true
		default:
			mok = r.msgs.SeekGE(p)
		}
		next = false
		for ; mok && len(out) < limit; mok = r.msgs.Next() {
			k := r.msgs.Key()
			if !bytes.HasPrefix(k, p) {
				next = true
				break
			}
			id := messageKeyID(k)
			if id <= lower {
				return out, r.iterErr()
			}
			m, err := decodeMessage(r.msgs.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, r.iterErr()
}

// ascending returns up to limit messages with lower < id < upper, oldest
// first (upper 0: unbounded).
func (r *historyReader) ascending(lower, upper snowflake.ID, limit int) ([]store.Message, error) {
	if lower == ^snowflake.ID(0) || (upper != 0 && upper <= lower+1) {
		return nil, nil
	}
	start := lower + 1 // oldest id to consider (inclusive)
	startBucket := r.s.bucketOf(r.ch, start)
	// Index keys are complemented: older buckets sort later, so walk
	// backwards from the start bucket's key.
	ok := r.idx.SeekLT(append(bucketIndexKey(r.ch, startBucket), 0))
	out := make([]store.Message, 0, limit)
	next := false // as in descending, backwards
	for ; ok && len(out) < limit; ok = r.idx.Prev() {
		bucket := bucketIndexBucket(r.idx.Key())
		p := bucketPrefix(r.ch, bucket)
		var mok bool
		switch {
		case bucket == startBucket:
			mok = r.msgs.SeekLT(append(messageKey(r.ch, bucket, start), 0))
		case next && bytes.HasPrefix(r.msgs.Key(), p):
			mok = true
		default:
			mok = r.msgs.SeekLT(prefixEnd(p))
		}
		next = false
		for ; mok && len(out) < limit; mok = r.msgs.Prev() {
			k := r.msgs.Key()
			if !bytes.HasPrefix(k, p) {
				next = true
				break
			}
			if upper != 0 && messageKeyID(k) >= upper {
				return out, r.iterErr()
			}
			m, err := decodeMessage(r.msgs.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, r.iterErr()
}

func (r *historyReader) around(id snowflake.ID, limit int) ([]store.Message, error) {
	var pivot []store.Message
	v, closer, err := r.snap.Get(messageKey(r.ch, r.s.bucketOf(r.ch, id), id))
	switch {
	case err == nil:
		m, derr := decodeMessage(v)
		closer.Close()
		if derr != nil {
			return nil, derr
		}
		pivot = append(pivot, m)
	case err != pebble.ErrNotFound:
		return nil, wrapErr("list messages", err)
	}
	rest := limit - len(pivot)
	newer, err := r.ascending(id, 0, rest)
	if err != nil {
		return nil, err
	}
	older, err := r.descending(id, 0, rest)
	if err != nil {
		return nil, err
	}
	nNewer := min(rest/2, len(newer))
	nOlder := min(rest-nNewer, len(older))
	nNewer = min(rest-nOlder, len(newer))

	out := make([]store.Message, 0, nNewer+len(pivot)+nOlder)
	for i := nNewer - 1; i >= 0; i-- {
		out = append(out, newer[i])
	}
	out = append(out, pivot...)
	return append(out, older[:nOlder]...), nil
}
