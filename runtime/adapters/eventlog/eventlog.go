// Package eventlog is the port for Concord's durable event log: the stream of
// message events (MESSAGE_CREATE, MESSAGE_UPDATE, MESSAGE_DELETE) that
// consumers which must not miss one — mention counting in read states,
// search, AutoMod, push — read at their own pace. Live delivery does not go
// through it.
//
// Two adapters implement Log and pass one conformance suite
// (eventlog/eventlogtest): eventlog/kafka (Apache Kafka through IBM/sarama)
// for production and eventlog/memlog (an in-process log persisted in a
// directory) for `concord dev` and unit tests.
//
// # Contract
//
// Topics and partitions. A topic has a fixed number of partitions. Append
// places a record in the partition chosen by hashing its Key (FNV-1a, the
// same function in both adapters), so all records with one key — Concord
// keys message events by channel_id — land in one partition.
//
// Ordering. Within a partition records have dense, increasing offsets
// starting at 0 and are delivered in offset order. Records appended with the
// same key by one caller, one Append after another (or within one Append
// call, in slice order), are stored in that order. Nothing is ordered across
// partitions.
//
// Durability. Append returns nil only once every record is durable: written
// to all in-sync replicas (Kafka, acks=all with an idempotent producer) or
// written and fsynced (memlog). An error means some records may or may not
// have been stored: the caller retries, so a record can appear more than
// once. Consumers must therefore be idempotent; Concord's consumers dedupe by
// message id.
//
// Consumer groups. Consume joins a named group. The group splits the
// partitions of the subscribed topics among its live members; each partition
// has at most one owner per generation. A new group starts each partition at
// its oldest record. A member marks how far it has processed a partition
// (Session.Mark); marks are committed to the log about every second, at the
// end of each generation and by Session.Commit. After a restart or a
// rebalance a partition resumes at its last committed offset, so delivery is
// at-least-once: records processed but not yet committed are delivered again.
// A record whose offset is below the committed offset is never delivered to
// the group again.
//
// Rebalance. When a member joins or leaves, the group ends the current
// generation: every member's generation context is cancelled, its Claims'
// Records channels close, it must return from ConsumeClaim, Cleanup runs and
// its marks are committed; then partitions are reassigned and a new
// generation starts with Setup. A member that needs its processing and its
// committed offsets to agree (read states) marks only what it has made
// durable, and may Commit in Cleanup.
package eventlog

import (
	"context"
	"errors"
	"hash/fnv"
	"time"
)

// Sentinel errors. Adapters wrap them (errors.Is works) and never return a
// raw client error.
var (
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("eventlog: log closed")
	// ErrUnavailable means the log could not be reached or did not
	// acknowledge in time; the call may be retried.
	ErrUnavailable = errors.New("eventlog: unavailable")
	// ErrInvalid reports an invalid argument (empty topic or group, a record
	// too large).
	ErrInvalid = errors.New("eventlog: invalid argument")
)

// Record is one entry of the log. Topic, Key and Value are set by the
// producer; Partition, Offset and Time are set by the log.
type Record struct {
	Topic string
	// Key picks the partition; records with equal keys keep their order.
	Key []byte
	// Value is the payload, opaque to the log.
	Value []byte
	// Partition and Offset locate the record; set on delivery.
	Partition int32
	Offset    int64
	// Time is when the log accepted the record; set on delivery.
	Time time.Time
}

// Log is a partitioned, durable, ordered log with consumer groups.
type Log interface {
	// EnsureTopic creates topic with the given number of partitions if it
	// does not exist. An existing topic keeps its partition count.
	EnsureTopic(ctx context.Context, topic string, partitions int) error
	// Append durably stores records (see the package contract). Records may
	// name different topics. A topic that does not exist is created with the
	// adapter's default partition count.
	Append(ctx context.Context, records ...Record) error
	// Consume joins group, subscribed to topics, and runs h for each
	// generation until ctx is done (it then returns nil after committing
	// marked offsets), h returns an error (returned, wrapped), or the Log is
	// closed (ErrClosed).
	Consume(ctx context.Context, group string, topics []string, h Handler) error
	// Close releases the log. Consumers return ErrClosed.
	Close() error
}

// Handler processes the partitions a group assigns to one member, one
// generation at a time. ctx is the generation context: it is cancelled when
// the generation ends (rebalance, shutdown).
type Handler interface {
	// Setup runs at the start of a generation, before any ConsumeClaim.
	Setup(ctx context.Context, s Session) error
	// ConsumeClaim processes one partition. It reads c.Records() until the
	// channel is closed (the generation ended) and must then return. It runs
	// concurrently with ConsumeClaim of the member's other partitions.
	ConsumeClaim(ctx context.Context, s Session, c Claim) error
	// Cleanup runs once every ConsumeClaim of the generation has returned,
	// before the final commit of the generation's marks.
	Cleanup(ctx context.Context, s Session) error
}

// Session is one member's view of one generation of a group.
type Session interface {
	// MemberID identifies the member within the group.
	MemberID() string
	// Generation increases with every rebalance.
	Generation() int64
	// Claims lists the partitions this member owns in this generation, by
	// topic.
	Claims() map[string][]int32
	// Mark records that every record of the partition before offset next
	// has been processed; it is committed later (see the contract). Marks
	// never move a partition backwards.
	Mark(topic string, partition int32, next int64)
	// Commit synchronously commits the marks made so far.
	Commit(ctx context.Context) error
}

// Claim is one partition owned by a member for one generation.
type Claim interface {
	// Topic and Partition name the claimed partition.
	Topic() string
	Partition() int32
	// InitialOffset is the offset of the first record delivered: the
	// committed offset, or the partition's oldest offset for a new group.
	InitialOffset() int64
	// Records delivers the partition's records in offset order, including
	// records appended later, until the generation ends.
	Records() <-chan Record
}

// PartitionFor returns the partition of key among n partitions: FNV-1a 32,
// as sarama's default hash partitioner computes it, so memlog and Kafka
// place a key alike.
func PartitionFor(key []byte, n int) int32 {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	p := int32(h.Sum32()) % int32(n)
	if p < 0 {
		p = -p
	}
	return p
}

// EachFunc processes one record.
type EachFunc func(ctx context.Context, r Record) error

// Each returns a Handler that calls f for every record in order and marks
// the record processed once f returns nil. An error from f ends the
// generation and Consume returns it; the record is delivered again to
// whichever member next owns the partition.
func Each(f EachFunc) Handler { return eachHandler(f) }

type eachHandler EachFunc

func (eachHandler) Setup(context.Context, Session) error   { return nil }
func (eachHandler) Cleanup(context.Context, Session) error { return nil }

func (f eachHandler) ConsumeClaim(ctx context.Context, s Session, c Claim) error {
	for r := range c.Records() {
		if err := f(ctx, r); err != nil {
			return err
		}
		s.Mark(r.Topic, r.Partition, r.Offset+1)
	}
	return nil
}

// Publisher hands message events to the log for the API: Publish returns
// quickly (bounded, without waiting for the log) and the event reaches the
// log at least once. outbox.Outbox implements it, and also relays a
// store's transactional outbox (events committed with message writes).
type Publisher interface {
	Publish(ctx context.Context, ev MessageEvent) error
}

// Inspector is the optional ability to read positions: where each
// partition of a topic ends and how far a group has committed. Lag metrics
// and the event-age autoscaler use it; tests use it to wait for consumers.
type Inspector interface {
	// End returns the next offset of each partition of topic, by
	// partition number.
	End(ctx context.Context, topic string) ([]int64, error)
	// Committed returns group's committed offsets on topic by partition;
	// partitions without a commit are absent.
	Committed(ctx context.Context, group, topic string) (map[int32]int64, error)
}
