package store

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// OutboxShards is the number of shards of the transactional outbox. Every
// event of one channel goes to one shard (OutboxShard), so a relay that
// drains a shard oldest first appends each channel's events in the order
// they were written. Sixteen is few enough for a sweep to visit every shard
// in a handful of queries and enough to spread the rows of a busy cluster
// over as many Cassandra partitions.
const OutboxShards = 16

// OutboxShard returns the outbox shard of a channel's events.
func OutboxShard(channelID snowflake.ID) int {
	h := fnv.New32a()
	var b [8]byte
	for i := range b {
		b[i] = byte(channelID >> (56 - 8*i))
	}
	h.Write(b[:])
	return int(h.Sum32() % OutboxShards)
}

// Event is a record for the event log committed with a message write. The
// store keeps it opaque: Topic, Key and Value are the log record's.
type Event struct {
	Topic string
	Key   []byte
	Value []byte
}

// OutboxEntry is an event waiting in the outbox for a relay.
type OutboxEntry struct {
	// Shard is the entry's shard, ID its identity within the shard: opaque
	// bytes, ordered by the time the entry was written.
	Shard int
	ID    []byte
	// Written is when the entry was committed (from the adapter's clock).
	Written time.Time
	Event   Event
}

// MessageEvents is the optional ability of a Messages store to commit event
// records in the same atomic write as a message write (a transactional
// outbox): after a crash either both the message change and its events
// are there, or neither is. Without it a process that died between the
// message write and a separate enqueue lost the event that durable
// consumers (mention counting) need.
type MessageEvents interface {
	// PutMessageEvents is PutMessage that also adds events to the outbox,
	// atomically. Each event goes to the shard of m.ChannelID.
	PutMessageEvents(ctx context.Context, m Message, events ...Event) error
	// DeleteMessagesEvents is DeleteMessages that also adds events to the
	// outbox, atomically (the events are committed even when no id
	// existed: a retried delete's first attempt may have removed them).
	DeleteMessagesEvents(ctx context.Context, channelID snowflake.ID, ids []snowflake.ID, events ...Event) error
}

// Outbox reads and drains the committed events.
//
// Contract: an entry committed by a MessageEvents write is listed by every
// ListOutbox of its shard until DeleteOutbox removes it; listing is oldest
// first; deleting an id that is gone is not an error.
type Outbox interface {
	// ListOutbox returns up to limit entries of shard (0..OutboxShards-1),
	// oldest first. With olderThan > 0 only entries written at least that
	// long ago are returned.
	ListOutbox(ctx context.Context, shard, limit int, olderThan time.Duration) ([]OutboxEntry, error)
	// DeleteOutbox removes entries of shard by id.
	DeleteOutbox(ctx context.Context, shard int, ids [][]byte) error
}

// OutboxRange is an Outbox that lists a window of a shard by write time,
// so that a relay reading a shard's newest entries starts after the ones
// it has deleted instead of at the head of the shard: a store may keep a
// deleted entry as a tombstone until compaction (Cassandra for
// gc_grace_seconds and beyond, Pebble until its next compaction), and a
// read from the head walks every one of them — at a busy shard's rate,
// soon more than a read may walk.
type OutboxRange interface {
	// ListOutboxRange returns up to limit entries of shard written from
	// from through to (both inclusive; a zero time leaves that side
	// open), oldest first.
	ListOutboxRange(ctx context.Context, shard, limit int, from, to time.Time) ([]OutboxEntry, error)
}

// TransactionalOutbox is a store with the outbox: it writes events with
// messages and lets a relay drain them.
type TransactionalOutbox interface {
	MessageEvents
	Outbox
}
