package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
)

// storeRelay drains a store's transactional outbox into the log.
//
// Who relays what: every process that writes events relays the shards it
// wrote to, as soon as each write is acknowledged (Committed marks the
// shard); at start it drains every shard whatever the age of the rows (a
// previous life of this process may have died before relaying them); and
// every SweepEvery it drains the rows of every shard older than SweepAge,
// so the rows of a process that died and does not come back are not
// stranded. A row can therefore be appended twice — by its writer and by
// a starting or sweeping process that read it before the writer deleted
// it — which the log's at-least-once contract allows: consumers dedupe by
// message id. The age bound keeps that rare: a sweep only takes rows a
// live writer should have relayed many seconds ago.
//
// Where a read starts: a store keeps a deleted entry as a tombstone until
// compaction, so a read from the head of a busy shard walks every entry
// the relays deleted in the last hour or more. With a store that lists a
// window (store.OutboxRange), each shard's reads start where this relay
// knows nothing can be left before them: a relay pass that drained a
// shard completely, starting at local time T, relayed every entry this
// process had committed to it before T, and an entry committed later has
// an id no older than its write's start, so the next pass starts
// tailMargin before T (a failed pass moves nothing: the next one starts
// where it did, which is how a backlog built while the log was down is
// read). Sweeps likewise start sweepOverlap before the end of the last
// complete sweep. The first pass of each shard after start reads it from
// the head. An entry committed more than tailMargin after its id was
// minted (a write slower than that) is left to the sweep; one later than
// SweepAge plus sweepOverlap to the next start of a process.
type storeRelay struct {
	o   *Outbox
	src store.Outbox
	// rng is src's window listing (nil: every read starts at the head).
	rng store.OutboxRange
	// tailFrom and sweptTo are, per shard, where the next relay pass and
	// the next sweep start (zero: the head). Only run touches them.
	tailFrom, sweptTo [store.OutboxShards]time.Time

	mu      sync.Mutex
	dirty   map[int]bool
	gen     uint64        // bumped by every Committed
	doneGen uint64        // every shard marked up to this gen is relayed
	settled chan struct{} // closed and replaced when doneGen moves
	wake    chan struct{}
}

// RelayStore starts relaying src's outbox into the log. The first store
// wins: it returns false (and does nothing) when another store is already
// relayed or the outbox is closed. Writers that commit events with their
// message writes call Committed after each write.
func (o *Outbox) RelayStore(src store.Outbox) bool {
	if src == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.store != nil {
		return sameStore(o.storeSrc(), src)
	}
	r := &storeRelay{o: o, src: src, dirty: map[int]bool{}, settled: make(chan struct{}), wake: make(chan struct{}, 1)}
	r.rng, _ = src.(store.OutboxRange)
	// A previous life of this process may have died between a write and
	// its relay: the first pass takes every shard.
	for shard := range store.OutboxShards {
		r.dirty[shard] = true
	}
	r.gen = 1
	o.store = r
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		r.run(o.ctx)
	}()
	r.signal()
	return true
}

// RelaysStore reports whether src's outbox is the one this Outbox
// relays: only then may a writer commit events to it.
func (o *Outbox) RelaysStore(src any) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.store != nil && !o.closed && sameStore(o.store.src, src)
}

func (o *Outbox) storeSrc() store.Outbox {
	if o.store == nil {
		return nil
	}
	return o.store.src
}

// sameStore compares two store values without panicking on
// uncomparable dynamic types.
func sameStore(a, b any) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}

// Committed tells the relay that the store's outbox shard holds events
// this process just committed.
func (o *Outbox) Committed(shard int) {
	o.mu.Lock()
	r := o.store
	o.mu.Unlock()
	if r == nil || shard < 0 || shard >= store.OutboxShards {
		return
	}
	r.mu.Lock()
	r.dirty[shard] = true
	r.gen++
	r.mu.Unlock()
	r.signal()
}

func (r *storeRelay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// take returns the dirty shards and the generation they cover.
func (r *storeRelay) take() ([]int, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	shards := make([]int, 0, len(r.dirty))
	for s := range r.dirty {
		shards = append(shards, s)
	}
	clear(r.dirty)
	return shards, r.gen
}

func (r *storeRelay) run(ctx context.Context) {
	sweep := time.NewTicker(r.o.cfg.SweepEvery)
	defer sweep.Stop()
	backoff := 50 * time.Millisecond
	for {
		shards, gen := r.take()
		failed := false
		for _, shard := range shards {
			started := time.Now()
			if _, err := r.drain(ctx, shard, r.tailFrom[shard], time.Time{}); err != nil {
				if ctx.Err() != nil {
					return
				}
				failed = true
				r.o.failures.Inc()
				r.o.cfg.Logger.Warn("outbox relay of the store failed; will retry", "shard", shard, "err", err, "backoff", backoff)
				r.mu.Lock()
				r.dirty[shard] = true
				r.mu.Unlock()
				continue
			}
			r.tailFrom[shard] = started.Add(-tailMargin)
		}
		if failed {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, r.o.cfg.MaxBackoff)
			continue
		}
		backoff = 50 * time.Millisecond
		r.mu.Lock()
		if gen > r.doneGen {
			r.doneGen = gen
			close(r.settled)
			r.settled = make(chan struct{})
		}
		again := len(r.dirty) > 0
		r.mu.Unlock()
		if again {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-sweep.C:
			for shard := range store.OutboxShards {
				to := time.Now().Add(-r.o.cfg.SweepAge)
				var from time.Time
				if !r.sweptTo[shard].IsZero() {
					from = r.sweptTo[shard].Add(-r.o.cfg.SweepEvery)
				}
				if _, err := r.drain(ctx, shard, from, to); err != nil {
					if ctx.Err() != nil {
						return
					}
					r.o.failures.Inc()
					r.o.cfg.Logger.Warn("outbox sweep of the store failed; the next sweep retries", "shard", shard, "err", err)
					continue
				}
				r.sweptTo[shard] = to
			}
		}
	}
}

// tailMargin is how far before a complete relay pass's start the next
// pass of the shard reads: more than a message write takes between
// minting its entry's id and returning.
const tailMargin = 2 * time.Second

// list reads a batch of shard's entries written from from through to (a
// zero time leaves that side open): a window when the store lists one,
// else from the head.
func (r *storeRelay) list(ctx context.Context, shard int, from, to time.Time) ([]store.OutboxEntry, error) {
	if r.rng != nil {
		return r.rng.ListOutboxRange(ctx, shard, r.o.cfg.BatchSize, from, to)
	}
	var olderThan time.Duration
	if !to.IsZero() {
		olderThan = max(time.Since(to), time.Nanosecond)
	}
	return r.src.ListOutbox(ctx, shard, r.o.cfg.BatchSize, olderThan)
}

// drain appends shard's entries written from from through to (a zero
// time leaves that side open) to the log in batches and deletes each
// batch once the log acknowledged it. It returns how many it relayed.
func (r *storeRelay) drain(ctx context.Context, shard int, from, to time.Time) (int, error) {
	n := 0
	for {
		es, err := r.list(ctx, shard, from, to)
		if err != nil {
			return n, fmt.Errorf("outbox: list store shard %d: %w", shard, err)
		}
		if len(es) == 0 {
			return n, nil
		}
		recs := make([]eventlog.Record, len(es))
		ids := make([][]byte, len(es))
		for i, e := range es {
			recs[i] = eventlog.Record{Topic: e.Event.Topic, Key: e.Event.Key, Value: e.Event.Value}
			ids[i] = e.ID
		}
		actx, cancel := context.WithTimeout(ctx, r.o.cfg.PublishTimeout)
		err = r.o.log.Append(actx, recs...)
		cancel()
		if err != nil {
			return n, fmt.Errorf("outbox: append %d records of store shard %d: %w", len(recs), shard, err)
		}
		// Only after the log acknowledged: a crash before this delete
		// appends the batch again, never loses it.
		if err := r.src.DeleteOutbox(ctx, shard, ids); err != nil {
			return n, fmt.Errorf("outbox: delete %d relayed entries of store shard %d: %w", len(ids), shard, err)
		}
		r.o.published.Add(float64(len(es)))
		r.o.storeRelayed.Add(float64(len(es)))
		n += len(es)
		if len(es) < r.o.cfg.BatchSize {
			return n, nil
		}
	}
}

// flushStore waits until every shard marked before the call is relayed.
func (o *Outbox) flushStore(ctx context.Context) error {
	o.mu.Lock()
	r := o.store
	o.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	target := r.gen
	r.mu.Unlock()
	for {
		r.mu.Lock()
		done, ch := r.doneGen >= target, r.settled
		r.mu.Unlock()
		if done {
			return nil
		}
		r.signal()
		select {
		case <-ctx.Done():
			return fmt.Errorf("outbox: flush store relay: %w", ctx.Err())
		case <-ch:
		}
	}
}
