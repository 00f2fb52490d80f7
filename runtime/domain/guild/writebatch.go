package guild

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"weak"

	"github.com/concord-chat/concord/runtime/adapters/store"
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
	// The write runs under the context it is given (writeContext), and
	// may run again when its first run failed in doubt (see inDoubt).
	prepare func(a *Actor) (commit func(ctx context.Context) error, err error)
	// finish runs in the actor once commit returned, with its error, and
	// with the context commit ran under.
	finish func(a *Actor, ctx context.Context, commitErr error) error
	// late runs in the actor when the write, failed in doubt and answered
	// as failed, was completed afterwards: it fans the write out, as
	// finish would have.
	late func(a *Actor, ctx context.Context) error
	// describe runs in the actor when the write fell in doubt: the
	// write as the ledger records it (doubtledger.go), for the node
	// that owns the channel next. Nil: not recorded.
	describe func(a *Actor, ctx context.Context) doubtRecord
	res      chan error

	// commit is what prepare returned, kept for a write in doubt.
	commit func(ctx context.Context) error
	// messageID is the message of a write in doubt; recorded is set
	// once its ledger row is written, and forget, once it may exist,
	// drops the row (retry calls it when the write is completed).
	messageID snowflake.ID
	recorded  bool
	forget    func(ctx context.Context) error
}

// start is prepare, unless the actor failed or the caller left before
// its turn (then nothing is written).
func (w *batchedWrite) start(a *Actor) error {
	switch {
	case a.failed != nil:
		return a.failed
	case w.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, w.ctx.Err())
	}
	var err error
	w.commit, err = w.prepare(a)
	return err
}

// answer ends the write: the caller hears err.
func (w *batchedWrite) answer(a *Actor, err error) {
	a.detachIfPlacedElsewhere()
	w.res <- err
}

// alone runs the write by itself (the op's fn: a mailbox drained at
// retirement or at close).
func (w *batchedWrite) alone(a *Actor) {
	a.commitWrites([]*batchedWrite{w})
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
	ws := make([]*batchedWrite, len(batch))
	for i, o := range batch {
		a.begin(o)
		ws[i] = o.write
	}
	a.commitWrites(ws)
	for range batch {
		a.end()
	}
	if next != nil {
		a.process(*next)
	}
}

// channelRun is one channel's part of a batch: the channel's write in
// doubt, if it has one, then the batch's writes of the channel in id
// order.
type channelRun struct {
	channel snowflake.ID
	doubt   *batchedWrite
	writes  []int
	// settled is set when the write in doubt was completed.
	settled bool
}

// commitWrites prepares ws in order, commits them (one goroutine per
// channel, each channel's writes one after the other) and finishes and
// answers them in order.
//
// A store write that fails unavailable or out of time is in doubt
// (inDoubt): Cassandra may still apply it — a logged batch is
// replayed from the batch log, a replica that took it hands it to the
// others, a quorum read repairs it onto a quorum — with its id, which is
// older than any id minted after it. Had the channel's next write
// committed first, a reader could have read past the newer message and
// the old one would then appear behind it, where a client paging with
// after= never looks. So a channel's write in doubt is completed before
// any later write of the channel commits: it is written again (the write
// is idempotent for its id) until the store acknowledges it, and then it
// is fanned out (late) like any other. Until then the channel's later
// writes are refused, not attempted (ErrUnavailable, nothing written),
// and a retry in the background (settleLater) completes the write even
// when no other write comes. Completing rather than removing it: the
// write may already be visible (a read at quorum repairs a write that
// reached one replica), so a tombstone could take back a message a reader
// has seen, while a completed write is in the history once, in id order,
// before anything newer of its channel — the outcome an unacknowledged
// send is allowed to have.
func (a *Actor) commitWrites(ws []*batchedWrite) {
	errs := make([]error, len(ws))
	// A guild that came from another node may hold writes in doubt
	// of its previous owner (the ledger): known before any write.
	ledgerErr := a.loadDoubts()
	for i, w := range ws {
		if ledgerErr != nil {
			errs[i] = ledgerErr
			continue
		}
		errs[i] = w.start(a)
		if w.commit == nil && errs[i] == nil {
			errs[i] = fmt.Errorf("message write: %w: nothing to write", ErrInvalid)
		}
	}
	runs := map[snowflake.ID]*channelRun{}
	var order []*channelRun
	for i, w := range ws {
		if errs[i] != nil {
			w.commit = nil
			continue
		}
		r := runs[w.channel]
		if r == nil {
			r = &channelRun{channel: w.channel, doubt: a.svc.doubt.get(a.id, w.channel)}
			runs[w.channel] = r
			order = append(order, r)
		}
		r.writes = append(r.writes, i)
	}
	// Each write's bound starts when its commit does, not while it waits
	// for the writes of its channel ahead of it.
	ctxs := make([]context.Context, len(ws))
	cancels := make([]context.CancelFunc, len(ws))
	defer func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel()
			}
		}
	}()
	var wg sync.WaitGroup
	for _, r := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.doubt != nil {
				if err := r.doubt.retry(); err != nil {
					for _, i := range r.writes {
						errs[i] = inDoubtError(r.channel, err)
						ws[i].commit = nil // not attempted
					}
					return
				}
				r.settled = true
			}
			for k, i := range r.writes {
				ctxs[i], cancels[i] = writeContext(ws[i].ctx)
				if errs[i] = ws[i].commit(ctxs[i]); errs[i] == nil {
					continue
				}
				// The writes behind a failed one are not attempted:
				// if the failed one is in doubt they must wait for it,
				// and if it is not they are answered the same.
				for _, j := range r.writes[k+1:] {
					errs[j] = inDoubtError(r.channel, errs[i])
					ws[j].commit = nil
				}
				return
			}
		}()
	}
	wg.Wait()
	for _, r := range order {
		if !r.settled {
			continue
		}
		a.svc.doubt.drop(a.id, r.channel, r.doubt)
		a.fanOutLate(r.doubt)
	}
	// Writes now in doubt are held, and recorded in the ledger before
	// their callers hear back, for the node that owns the guild next.
	var doubtful []*batchedWrite
	for i, w := range ws {
		if w.commit != nil && inDoubt(errs[i]) {
			a.svc.doubt.put(a.id, w.channel, w)
			doubtful = append(doubtful, w)
		}
	}
	a.recordDoubts(doubtful)
	for _, w := range doubtful {
		a.svc.settleLater(a.id, w.channel, w, 0)
	}
	for i, w := range ws {
		if w.commit == nil {
			w.answer(a, errs[i])
			continue
		}
		w.answer(a, w.finish(a, ctxs[i], errs[i]))
	}
}

// inDoubt reports whether a failed store write may still apply: the store
// was unavailable or timed out (store.ErrUnavailable), or the write's
// bound ended while it was under way — also on the data node it was sent
// to, which goes on writing after the guild node stopped waiting
// (context.DeadlineExceeded, context.Canceled over the transport). Other
// errors are the store refusing the write, which writing it again would
// not change.
func inDoubt(err error) bool {
	return err != nil && (errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled))
}

// inDoubtError is the answer of a write not attempted because an older
// write of its channel failed.
func inDoubtError(channel snowflake.ID, cause error) error {
	return fmt.Errorf("channel %d: %w: an earlier write of the channel is not settled: %w", channel, ErrUnavailable, cause)
}

// retry runs a write in doubt again under a fresh write context and,
// once it is completed, drops its ledger row (a row that cannot be
// dropped leaves the write in doubt: written again, it is the same).
func (w *batchedWrite) retry() error {
	ctx, cancel := writeContext(w.ctx)
	defer cancel()
	if err := w.commit(ctx); err != nil {
		return err
	}
	if w.forget != nil {
		if err := w.forget(ctx); err != nil {
			return err
		}
		w.forget = nil
	}
	return nil
}

// fanOutLate fans out a write in doubt that was completed.
func (a *Actor) fanOutLate(w *batchedWrite) {
	ctx, cancel := writeContext(w.ctx)
	defer cancel()
	if err := w.late(a, ctx); err != nil {
		a.svc.log.Warn("message write completed after it was answered as failed; not fanned out", "guild_id", a.id,
			"channel_id", w.channel, "err", err)
		return
	}
	a.svc.log.Info("message write completed after it was answered as failed", "guild_id", a.id, "channel_id", w.channel)
}

// settle completes the write in doubt of channel, if it has one, before a
// write of the channel that is not batched (a deletion) goes on.
func (a *Actor) settle(channel snowflake.ID) error {
	if err := a.loadDoubts(); err != nil {
		return err
	}
	w := a.svc.doubt.get(a.id, channel)
	if w == nil {
		return nil
	}
	if err := w.retry(); err != nil {
		if !w.recorded {
			a.recordDoubts([]*batchedWrite{w})
		}
		return inDoubtError(channel, err)
	}
	a.svc.doubt.drop(a.id, channel, w)
	a.fanOutLate(w)
	return nil
}

// settleLater retries the write in doubt w of channel after a pause that
// doubles with each attempt, until it is settled (by this or by the
// channel's next write) or the service closes: a channel nobody writes to
// again still gets its message completed and fanned out.
func (s *Service) settleLater(guildID, channel snowflake.ID, w *batchedWrite, attempt int) {
	pause := min(time.Second<<min(attempt, 5), 30*time.Second)
	time.AfterFunc(pause, func() {
		if s.doubt.get(guildID, channel) != w {
			return
		}
		// A guild now placed on another node is written by its new
		// owner: completing the write from here would put it behind
		// what the owner wrote since. The owner completes it from the
		// ledger; one that was not recorded is left to the store (it
		// may still land), and said.
		if own := s.cfg.Owns; own != nil && !own(guildID) {
			s.doubt.drop(guildID, channel, w)
			s.log.Warn("message write in doubt handed to the guild's new owner", "guild_id", guildID,
				"channel_id", channel, "recorded", w.recorded)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*writeTimeout)
		defer cancel()
		err := s.write(ctx, guildID, func(a *Actor) error { return a.settle(channel) })
		switch {
		case err == nil:
		case errors.Is(err, ErrUnavailable) && s.doubt.get(guildID, channel) == w:
			s.settleLater(guildID, channel, w, attempt+1)
		default:
			s.log.Warn("message write in doubt not settled", "guild_id", guildID, "channel_id", channel, "err", err)
		}
	})
}

// doubtTable holds the message writes in doubt (see commitWrites), by
// guild and channel: at most one a channel, since the channel's later
// writes wait for it. It lives in the Service, not in the actor, so an
// actor unloaded while idle does not forget them.
type doubtTable struct {
	mu sync.Mutex
	m  map[doubtKey]*batchedWrite
	// read holds, per guild, the actor that read the guild's ledger
	// (doubtledger.go).
	read map[snowflake.ID]weak.Pointer[Actor]
}

type doubtKey struct{ guild, channel snowflake.ID }

func (d *doubtTable) get(guild, channel snowflake.ID) *batchedWrite {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[doubtKey{guild, channel}]
}

func (d *doubtTable) put(guild, channel snowflake.ID, w *batchedWrite) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[doubtKey]*batchedWrite{}
	}
	d.m[doubtKey{guild, channel}] = w
}

// drop forgets w, if it is still channel's write in doubt.
func (d *doubtTable) drop(guild, channel snowflake.ID, w *batchedWrite) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m[doubtKey{guild, channel}] == w {
		delete(d.m, doubtKey{guild, channel})
	}
}
