// Package logbatch is the consumer loop the live path's log consumers
// share (the archiver, the ML moderation consumer): one partition's
// records in offset order, gathered into batches of what is already
// waiting (a batch is handed over as soon as the partition has nothing
// more to give, or at MaxBatch), some records applied one at a time
// between batches, and the partition marked only up to what is done, so
// a restart repeats at most the tail that was not.
package logbatch

import (
	"context"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// Step is what one record is to a consumer.
type Step int

const (
	// Skip: nothing to do; the record counts as done once every record
	// before it is.
	Skip Step = iota
	// Add: the record's item joins the batch.
	Add
	// Apply: the batch so far is flushed, then the record is applied on
	// its own (a retraction after the comments before it).
	Apply
)

// Handler is an eventlog.Handler running the loop over every partition
// it is given. Its functions run concurrently for different partitions.
type Handler[T any] struct {
	// MaxBatch bounds a batch (default 256).
	MaxBatch int
	// Sort says what rec is to the consumer, and its item for Add and
	// Apply.
	Sort func(rec eventlog.Record) (Step, T)
	// Flush handles one batch of partition's items, in offset order. An
	// error ends the consumer (its Consume returns it), unless the
	// generation ended meanwhile: then it ends only the claim, and the
	// records from the batch on, never marked, go to the partition's
	// next owner.
	Flush func(ctx context.Context, partition int32, batch []T) error
	// Apply handles an Apply record, after every record before it is
	// done. Nil: Apply records are skipped.
	Apply func(ctx context.Context, partition int32, rec eventlog.Record, item T) error
}

var _ eventlog.Handler = Handler[int]{}

// Setup implements eventlog.Handler.
func (Handler[T]) Setup(context.Context, eventlog.Session) error { return nil }

// Cleanup implements eventlog.Handler.
func (Handler[T]) Cleanup(context.Context, eventlog.Session) error { return nil }

// ConsumeClaim implements eventlog.Handler: it reads c until the
// generation ends or a Flush or Apply fails.
func (h Handler[T]) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	err := h.consume(ctx, s, c)
	if err != nil && ctx.Err() != nil {
		// A rebalance cancels the generation's context, and a write in
		// progress fails with it: that is the generation's end, not the
		// consumer's (an error would stop the process's role).
		return nil
	}
	return err
}

func (h Handler[T]) consume(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	maxBatch := h.MaxBatch
	if maxBatch <= 0 {
		maxBatch = 256
	}
	var batch []T
	var next int64 = -1
	mark := func() {
		if next >= 0 {
			s.Mark(c.Topic(), c.Partition(), next)
		}
	}
	flush := func() error {
		if len(batch) > 0 {
			if err := h.Flush(ctx, c.Partition(), batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		mark()
		return nil
	}
	for {
		var rec eventlog.Record
		var ok bool
		if len(batch) == 0 {
			rec, ok = <-c.Records()
		} else {
			// Batch what is already waiting; hand the batch over as soon
			// as nothing is.
			select {
			case rec, ok = <-c.Records():
			default:
				if err := flush(); err != nil {
					return err
				}
				continue
			}
		}
		if !ok {
			return flush()
		}
		step, item := h.Sort(rec)
		switch step {
		case Add:
			batch = append(batch, item)
			next = rec.Offset + 1
			if len(batch) >= maxBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		case Apply:
			if err := flush(); err != nil {
				return err
			}
			if h.Apply != nil {
				if err := h.Apply(ctx, c.Partition(), rec, item); err != nil {
					return err
				}
			}
			next = rec.Offset + 1
		default:
			next = rec.Offset + 1
		}
		if len(batch) == 0 {
			mark()
		}
	}
}
