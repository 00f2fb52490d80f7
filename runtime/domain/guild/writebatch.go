package guild

import (
	"context"
	"fmt"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// maxWriteBatch bounds the message writes one actor step commits
// together.
const maxWriteBatch = 64

// batchedWrite is a message write split for group commit. The actor runs
// prepare (the check, the id) in order for the writes queued one behind
// the other, runs their durable writes concurrently across channels — the
// store commits them together (Pebble's group commit, one Cassandra round
// trip's time) instead of one after the other —, and then runs finish
// (render, fan-out) in the same order. The writes of one channel stay one
// after the other, in id order: a reader of the channel's history must
// never see a message before an older one of the same channel is there,
// or a client paging with after= would skip the older one for good (the
// durability checker of test/faults found exactly that). Each write is
// still one step of the actor and is fanned out after it is durable, in
// the order the actor took them.
type batchedWrite struct {
	ctx context.Context
	// channel is the channel the message is written to: writes to one
	// channel are committed in order.
	channel snowflake.ID
	// prepare runs in the actor and returns the durable write (nil
	// together with the write's error when there is nothing to write).
	prepare func(a *Actor) (commit func() error, err error)
	// finish runs in the actor once commit returned, with its error.
	finish func(a *Actor, commitErr error) error
	res    chan error
}

// start is prepare, unless the actor failed or the caller left before
// its turn (then nothing is written).
func (w *batchedWrite) start(a *Actor) (func() error, error) {
	switch {
	case a.failed != nil:
		return nil, a.failed
	case w.ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, w.ctx.Err())
	}
	return w.prepare(a)
}

// answer ends the write: the caller hears err.
func (w *batchedWrite) answer(a *Actor, err error) {
	a.detachIfPlacedElsewhere()
	w.res <- err
}

// alone runs the write by itself (the op's fn: a mailbox drained at
// retirement or at close).
func (w *batchedWrite) alone(a *Actor) {
	commit, err := w.start(a)
	if commit == nil {
		w.answer(a, err)
		return
	}
	w.answer(a, w.finish(a, commit()))
}

// writeBatched runs w in the guild's actor and waits for its outcome as
// write does.
func (s *Service) writeBatched(ctx context.Context, guildID snowflake.ID, w *batchedWrite) error {
	a, err := s.actor(guildID)
	if err != nil {
		return err
	}
	w.ctx, w.res = ctx, make(chan error, 1)
	if err := a.enqueueOp(ctx, op{fn: w.alone, write: w}); err != nil {
		return err
	}
	select {
	case err := <-w.res:
		return err
	case <-s.done:
		return fmt.Errorf("%w: service closed", ErrUnavailable)
	}
}

// processWrites runs the message write first and the writes queued right
// behind it (up to maxWriteBatch; an op that is not one ends the batch and
// runs after it) as one batch: prepares in order, the durable writes
// together, finishes in order.
func (a *Actor) processWrites(first op) {
	batch := []op{first}
	var next *op
collect:
	for len(batch) < maxWriteBatch {
		select {
		case o := <-a.mailbox:
			if o.write == nil {
				next = &o
				break collect
			}
			batch = append(batch, o)
		default:
			break collect
		}
	}
	commits := make([]func() error, len(batch))
	errs := make([]error, len(batch))
	for i, o := range batch {
		a.begin(o)
		commits[i], errs[i] = o.write.start(a)
	}
	// One goroutine per channel commits that channel's writes in the
	// order their ids were minted; channels commit side by side.
	byChannel := make(map[snowflake.ID][]int, 1)
	var order []snowflake.ID
	for i, o := range batch {
		if commits[i] == nil {
			continue
		}
		ch := o.write.channel
		if _, ok := byChannel[ch]; !ok {
			order = append(order, ch)
		}
		byChannel[ch] = append(byChannel[ch], i)
	}
	var wg sync.WaitGroup
	for _, ch := range order {
		wg.Add(1)
		go func(idx []int) {
			defer wg.Done()
			for _, i := range idx {
				errs[i] = commits[i]()
			}
		}(byChannel[ch])
	}
	wg.Wait()
	for i, o := range batch {
		if commits[i] == nil {
			o.write.answer(a, errs[i])
		} else {
			o.write.answer(a, o.write.finish(a, errs[i]))
		}
		a.end()
	}
	if next != nil {
		a.process(*next)
	}
}
