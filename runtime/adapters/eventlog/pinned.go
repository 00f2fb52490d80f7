package eventlog

import "context"

// Pinned is the optional ability of a Log to append to a partition the
// caller chooses and to report the offsets the records got. Live comments
// pin each stream to one partition of their topic at creation and use the
// offset as the stream's sequence number, so adding partitions later never
// moves a live stream and the sequence replays to the same values.
type Pinned interface {
	// Partitions returns topic's partition count, creating the topic with
	// the adapter's default count when it is missing.
	Partitions(ctx context.Context, topic string) (int, error)
	// AppendTo durably appends records, in order, to one partition of
	// topic (their Topic fields are ignored) and returns each record's
	// offset. Durability and retries are as for Append: an error means
	// some records may have been stored.
	AppendTo(ctx context.Context, topic string, partition int32, records ...Record) ([]int64, error)
}
