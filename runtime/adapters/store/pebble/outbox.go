package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The transactional outbox: events committed in the same batch as the
// message write they describe, under 'o' shard id. An id is the entry's
// write time in nanoseconds, made strictly increasing within the
// database (the last id is recovered at open, so a clock that went back
// across a restart cannot reuse, and overwrite, a pending entry's key).

var (
	_ store.MessageEvents = (*Store)(nil)
	_ store.Outbox        = (*Store)(nil)
)

func outboxPrefix(shard int) []byte { return []byte{tagOutbox, byte(shard)} }

func outboxKey(shard int, id uint64) []byte { return appendU64(outboxPrefix(shard), id) }

// initOutbox finds the newest outbox id of any shard.
func (s *Store) initOutbox() error {
	for shard := range store.OutboxShards {
		p := outboxPrefix(shard)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return wrapErr("open outbox", err)
		}
		if it.Last() && len(it.Key()) == 10 {
			s.outboxLast = max(s.outboxLast, binary.BigEndian.Uint64(it.Key()[2:]))
		}
		if err := it.Close(); err != nil {
			return wrapErr("open outbox", err)
		}
	}
	return nil
}

// nextOutboxID returns a fresh id, the current time unless the clock has
// not moved past the last one.
func (s *Store) nextOutboxID() uint64 {
	s.outboxMu.Lock()
	defer s.outboxMu.Unlock()
	id := max(uint64(time.Now().UnixNano()), s.outboxLast+1)
	s.outboxLast = id
	return id
}

// addOutbox adds events of channel to batch b.
func (s *Store) addOutbox(b *pebble.Batch, channel snowflake.ID, events []store.Event) error {
	shard := store.OutboxShard(channel)
	for _, ev := range events {
		if ev.Topic == "" || len(ev.Topic) > 1<<15 {
			return fmt.Errorf("outbox event: invalid topic %q", ev.Topic)
		}
		if err := b.Set(outboxKey(shard, s.nextOutboxID()), encodeEvent(ev), nil); err != nil {
			return err
		}
	}
	return nil
}

var _ store.OutboxRange = (*Store)(nil)

// ListOutbox implements store.Outbox.
func (s *Store) ListOutbox(ctx context.Context, shard, limit int, olderThan time.Duration) ([]store.OutboxEntry, error) {
	var to time.Time
	if olderThan > 0 {
		to = time.Now().Add(-olderThan)
	}
	return s.ListOutboxRange(ctx, shard, limit, time.Time{}, to)
}

// ListOutboxRange implements store.OutboxRange: the iterator's bounds are
// the window's ids (an id is its write time in nanoseconds), so deleted
// keys before from are skipped by the bounds, not walked.
func (s *Store) ListOutboxRange(ctx context.Context, shard, limit int, from, to time.Time) ([]store.OutboxEntry, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if shard < 0 || shard >= store.OutboxShards {
		return nil, fmt.Errorf("pebble store: outbox shard %d out of range", shard)
	}
	if limit <= 0 {
		return nil, nil
	}
	p := outboxPrefix(shard)
	lower, upper := p, prefixEnd(p)
	if !from.IsZero() && from.UnixNano() > 0 {
		lower = outboxKey(shard, uint64(from.UnixNano()))
	}
	if !to.IsZero() {
		upper = outboxKey(shard, uint64(max(to.UnixNano(), 0))+1)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, wrapErr("list outbox", err)
	}
	var out []store.OutboxEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		if len(k) != 10 {
			continue
		}
		ev, err := decodeEvent(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		id := binary.BigEndian.Uint64(k[2:])
		out = append(out, store.OutboxEntry{Shard: shard, ID: append([]byte(nil), k[2:]...), Written: time.Unix(0, int64(id)), Event: ev})
	}
	if err := it.Close(); err != nil {
		return nil, wrapErr("list outbox", err)
	}
	return out, nil
}

// DeleteOutbox implements store.Outbox. The deletion is not synced: an
// entry that comes back after a crash is relayed again, which the
// outbox's at-least-once contract allows.
func (s *Store) DeleteOutbox(ctx context.Context, shard int, ids [][]byte) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if len(ids) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, id := range ids {
		if len(id) != 8 {
			return fmt.Errorf("pebble store: delete outbox: malformed id %x", id)
		}
		if err := b.Delete(append(outboxPrefix(shard), id...), nil); err != nil {
			return wrapErr("delete outbox", err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return wrapErr("delete outbox", err)
	}
	return nil
}

// encodeEvent lays an event out as u16 topic length | topic | u32 key
// length | key | value.
func encodeEvent(ev store.Event) []byte {
	b := make([]byte, 0, 6+len(ev.Topic)+len(ev.Key)+len(ev.Value))
	b = binary.BigEndian.AppendUint16(b, uint16(len(ev.Topic)))
	b = append(b, ev.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ev.Key)))
	b = append(b, ev.Key...)
	return append(b, ev.Value...)
}

var errCorruptEvent = errors.New("pebble store: corrupt outbox entry")

func decodeEvent(b []byte) (store.Event, error) {
	if len(b) < 2 {
		return store.Event{}, errCorruptEvent
	}
	tl := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) < tl+4 {
		return store.Event{}, errCorruptEvent
	}
	topic := string(b[:tl])
	b = b[tl:]
	kl := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if len(b) < kl {
		return store.Event{}, errCorruptEvent
	}
	return store.Event{Topic: topic, Key: append([]byte(nil), b[:kl]...), Value: append([]byte(nil), b[kl:]...)}, nil
}
