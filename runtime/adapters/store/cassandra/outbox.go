package cassandra

import (
	"context"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The transactional outbox. An event is a row of the outbox table,
// partitioned by shard (store.OutboxShard of the channel: a channel's
// events share a partition, so a relay reads them in write order) and
// clustered by a timeuuid minted by the writer, oldest first. The row is
// added in the same LOGGED batch as the message write it describes: the
// batch log makes the message row and the event row land together even
// when the coordinator dies half way, and the write is acknowledged only
// once the batch log holds both.

var (
	_ store.MessageEvents = (*Store)(nil)
	_ store.Outbox        = (*Store)(nil)
)

const outboxInsert = `INSERT INTO outbox (shard, id, topic, key, value) VALUES (?, ?, ?, ?, ?)`

func addOutbox(b *gocql.Batch, channel snowflake.ID, events []store.Event) error {
	shard := store.OutboxShard(channel)
	for _, ev := range events {
		if ev.Topic == "" {
			return fmt.Errorf("cassandra store: outbox event without topic: %w", store.ErrUnavailable)
		}
		b.Query(outboxInsert, shard, gocql.TimeUUID(), ev.Topic, ev.Key, ev.Value)
	}
	return nil
}

// idempotent lets the driver retry b as a whole: every row it writes has
// a fixed key (the timeuuids are minted before it is sent), so a second
// execution writes the same rows.
func idempotent(b *gocql.Batch) {
	for i := range b.Entries {
		b.Entries[i].Idempotent = true
	}
}

// PutMessageEvents implements store.MessageEvents: the message row, its
// bucket entry and the outbox rows in one logged batch.
func (s *Store) PutMessageEvents(ctx context.Context, m store.Message, events ...store.Event) error {
	if len(events) == 0 {
		return s.PutMessage(ctx, m)
	}
	bucket, err := s.bucketOf(ctx, m.ChannelID, m.ID)
	if err != nil {
		return err
	}
	stmt, args, size := messageInsert(m, bucket)
	b := s.logged(ctx)
	b.Query(stmt, args...)
	b.Query(bucketInsert, int64(m.ChannelID), bucket)
	if err := addOutbox(b, m.ChannelID, events); err != nil {
		return err
	}
	idempotent(b)
	if err := execBatch(ctx, b, "put message with events"); err != nil {
		return err
	}
	s.observeWrite(ctx, m.ChannelID, m.ID, size)
	return nil
}

// DeleteMessagesEvents implements store.MessageEvents: one row tombstone
// per message and the outbox rows in one logged batch; then, as
// DeleteMessages does, the messages' reactions and pins go and emptied
// buckets leave the bucket list (both idempotent upkeep that a retry
// completes). Per-row tombstones rather than DeleteMessages' range
// tombstone for a whole bucket: the atomic part must not depend on a read
// of what the bucket holds.
func (s *Store) DeleteMessagesEvents(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, events ...store.Event) error {
	if len(events) == 0 {
		return s.DeleteMessages(ctx, ch, ids)
	}
	ws, err := s.channelWidths(ctx, ch)
	if err != nil {
		return err
	}
	b := s.logged(ctx)
	buckets := map[int64]bool{}
	for _, id := range ids {
		bucket := ws.bucket(id, s.cfg.DefaultBucketWidth)
		buckets[bucket] = true
		b.Query(`DELETE FROM messages WHERE channel_id = ? AND bucket = ? AND message_id = ?`, int64(ch), bucket, int64(id))
	}
	if err := addOutbox(b, ch, events); err != nil {
		return err
	}
	idempotent(b)
	if err := execBatch(ctx, b, "delete messages with events"); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.dropMessageExtras(ctx, ch, ids); err != nil {
		return err
	}
	for bucket := range buckets {
		if err := s.pruneBucket(ctx, ch, bucket); err != nil {
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

// ListOutboxRange implements store.OutboxRange: a slice of the shard's
// partition between the two ids, so the rows deleted before from (row
// tombstones until compaction) are never read.
func (s *Store) ListOutboxRange(ctx context.Context, shard, limit int, from, to time.Time) ([]store.OutboxEntry, error) {
	if shard < 0 || shard >= store.OutboxShards {
		return nil, fmt.Errorf("cassandra store: outbox shard %d out of range", shard)
	}
	if limit <= 0 {
		return nil, nil
	}
	cql := `SELECT id, topic, key, value FROM outbox WHERE shard = ?`
	args := []any{shard}
	if !from.IsZero() {
		cql += ` AND id >= ?`
		args = append(args, gocql.MinTimeUUID(from))
	}
	if !to.IsZero() {
		cql += ` AND id <= ?`
		args = append(args, gocql.MaxTimeUUID(to))
	}
	q := s.session.Query(cql+` LIMIT ?`, append(args, limit)...)
	iter := q.PageSize(limit).IterContext(ctx)
	var (
		out        []store.OutboxEntry
		id         gocql.UUID
		topic      string
		key, value []byte
	)
	for iter.Scan(&id, &topic, &key, &value) {
		out = append(out, store.OutboxEntry{
			Shard: shard, ID: id.Bytes(), Written: id.Time(),
			Event: store.Event{Topic: topic, Key: append([]byte(nil), key...), Value: append([]byte(nil), value...)},
		})
	}
	if err := iter.Close(); err != nil {
		return nil, wrapErr("list outbox", err)
	}
	return out, nil
}

// DeleteOutbox implements store.Outbox: one single-partition batch.
func (s *Store) DeleteOutbox(ctx context.Context, shard int, ids [][]byte) error {
	if len(ids) == 0 {
		return nil
	}
	uuids := make([]gocql.UUID, len(ids))
	for i, raw := range ids {
		u, err := gocql.UUIDFromBytes(raw)
		if err != nil {
			return fmt.Errorf("cassandra store: delete outbox: malformed id %x: %w", raw, err)
		}
		uuids[i] = u
	}
	return wrapErr("delete outbox", s.session.Query(`DELETE FROM outbox WHERE shard = ? AND id IN ?`, shard, uuids).
		Idempotent(true).ExecContext(ctx))
}
