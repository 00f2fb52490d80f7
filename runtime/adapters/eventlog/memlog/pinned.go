package memlog

import (
	"context"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

var _ eventlog.Pinned = (*Log)(nil)

// Partitions implements eventlog.Pinned.
func (l *Log) Partitions(ctx context.Context, topic string) (int, error) {
	if !validName.MatchString(topic) {
		return 0, fmt.Errorf("%w: topic %q", eventlog.ErrInvalid, topic)
	}
	ps, err := l.topic(topic)
	if err != nil {
		return 0, err
	}
	return len(ps), nil
}

// AppendTo implements eventlog.Pinned: the records are written as one
// batch and fsynced once, so their offsets are consecutive.
func (l *Log) AppendTo(ctx context.Context, topic string, partition int32, records ...eventlog.Record) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", eventlog.ErrUnavailable, err)
	}
	ps, err := l.topic(topic)
	if err != nil {
		return nil, err
	}
	if partition < 0 || int(partition) >= len(ps) {
		return nil, fmt.Errorf("%w: partition %d of %q (%d partitions)", eventlog.ErrInvalid, partition, topic, len(ps))
	}
	if len(records) == 0 {
		return nil, nil
	}
	now := time.Now()
	bodies := make([][]byte, len(records))
	for i, r := range records {
		bodies[i] = encodeBody(r.Key, r.Value, now)
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.running.Done()
	first, err := ps[partition].append(bodies)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", eventlog.ErrUnavailable, err)
	}
	out := make([]int64, len(records))
	for i := range out {
		out[i] = first + int64(i)
	}
	return out, nil
}
