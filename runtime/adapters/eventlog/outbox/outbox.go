// Package outbox gets message events to the event log at least once
// without making the caller wait for the log.
//
// # Transactional outbox (the store's)
//
// When the store can commit event records in the same atomic write as
// the message write they describe (store.MessageEvents: one synced Pebble
// batch, one logged Cassandra batch adding a row to the outbox table),
// the process's Writer (NewWriter; the guild service writes every
// message change through it) writes the message and its event together
// and calls Committed; RelayStore's relay then appends the store's outbox
// rows to the log in batches and deletes them only after the log
// acknowledged them. What each write promises is stated once, on Writer.
// A crash
// at any point loses nothing: before the write returns neither the
// message nor the event exists; after it both do, and whichever relay
// runs next appends the event. A crash between the append and the delete
// appends a record twice; consumers dedupe by message id.
//
// The store's outbox is split into store.OutboxShards shards by channel,
// so one channel's events are relayed in write order. In a cluster every
// writing process relays the shards it wrote to, right after each write;
// at start a process drains every shard (its previous life may have died
// before relaying); and every SweepEvery each process drains the rows of
// every shard older than SweepAge, so a dead process's rows are relayed
// by the survivors. Duplicates come only from a starting or sweeping
// process reading a row its writer was relaying at the same moment: the
// age bound keeps that to rows whose writer is stuck, and the consumers'
// dedupe makes it harmless. A lease per shard would avoid even those, at
// the cost of a coordination service in the write path's recovery.
//
// # Local queue
//
// Without such a store (and for events that are not part of a message
// write) Publish queues the record in a local Pebble queue: one synced
// write (group-committed with concurrent publishers), bounded by
// Config.EnqueueTimeout. A background relay appends queued records to the
// log in batches, each attempt bounded by Config.PublishTimeout, retries
// failures with backoff and deletes records only after the log
// acknowledged them. On this path a crash after the store write and
// before Publish returns loses the event (the message itself is safe in
// history); the transactional outbox above is what closes that gap.
package outbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// ErrClosed is returned by Publish after Close.
var ErrClosed = errors.New("outbox: closed")

// Config configures an Outbox.
type Config struct {
	// Dir holds the queue (a Pebble database). Empty keeps it in memory,
	// which is only at-least-once while the process lives (tests).
	Dir string
	// EnqueueTimeout bounds Publish. Default 2s: a send waits for its
	// event to be durable, and a loaded disk's group commit can take a few
	// hundred milliseconds; a shorter bound acknowledged messages whose
	// event a crash then lost.
	EnqueueTimeout time.Duration
	// PublishTimeout bounds one relay append. Default 5s.
	PublishTimeout time.Duration
	// BatchSize is the most records per relay append. Default 256.
	BatchSize int
	// MaxBackoff caps the retry backoff after a failed append (it starts at
	// 50ms and doubles). Default 5s.
	MaxBackoff time.Duration
	// SweepAge is how old a row of the store's outbox must be before a
	// process that did not write it relays it (RelayStore). Default 30s:
	// far beyond a live writer's own relay, which runs right after the
	// write, so sweeps duplicate only rows whose writer is stuck or dead.
	SweepAge time.Duration
	// SweepEvery is how often the store's outbox is swept. Default 10s.
	SweepEvery time.Duration
	// Registerer receives the outbox metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// Outbox is a durable queue in front of an eventlog.Log, with a relay. It
// implements eventlog.Publisher.
type Outbox struct {
	cfg Config
	log eventlog.Log
	db  *pebble.DB

	mu     sync.Mutex
	seq    uint64 // next key
	closed bool

	wake    chan struct{}
	drained chan struct{} // closed and replaced when the queue empties
	stop    context.CancelFunc
	done    chan struct{}
	// ctx lives until Close; store is the store relay (store.go), wg
	// counts its goroutine.
	ctx   context.Context
	store *storeRelay
	wg    sync.WaitGroup

	pending      prometheus.Gauge
	published    prometheus.Counter
	failures     prometheus.Counter
	storeRelayed prometheus.Counter
}

var _ eventlog.Publisher = (*Outbox)(nil)

// New opens the queue and starts the relay, which republishes whatever a
// previous process left queued.
func New(cfg Config, log eventlog.Log) (*Outbox, error) {
	if log == nil {
		return nil, errors.New("outbox: nil event log")
	}
	if cfg.EnqueueTimeout <= 0 {
		cfg.EnqueueTimeout = 2 * time.Second
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 5 * time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.SweepAge <= 0 {
		cfg.SweepAge = 30 * time.Second
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := &pebble.Options{}
	dir := cfg.Dir
	if dir == "" {
		opts.FS = vfs.NewMem()
		dir = "outbox"
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("outbox: open queue: %w", err)
	}
	o := &Outbox{cfg: cfg, log: log, db: db, wake: make(chan struct{}, 1), drained: make(chan struct{}), done: make(chan struct{})}
	if err := o.initMetrics(); err != nil {
		db.Close()
		return nil, err
	}
	n, last, err := o.scan()
	if err != nil {
		db.Close()
		return nil, err
	}
	o.seq = last + 1
	o.pending.Set(float64(n))
	ctx, cancel := context.WithCancel(context.Background())
	o.ctx, o.stop = ctx, cancel
	go o.relay(ctx)
	o.signal()
	return o, nil
}

func (o *Outbox) initMetrics() error {
	o.pending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "concord_eventlog_outbox_pending_records", Help: "Records queued for the event log, not yet acknowledged."})
	o.published = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_eventlog_outbox_published_total", Help: "Records the relay appended to the event log."})
	o.failures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_eventlog_outbox_append_failures_total", Help: "Relay appends that failed and will be retried."})
	o.storeRelayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_eventlog_outbox_store_relayed_total", Help: "Records committed with message writes in the store's outbox that the relay appended to the event log."})
	if o.cfg.Registerer == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{o.pending, o.published, o.failures, o.storeRelayed} {
		if err := o.cfg.Registerer.Register(c); err != nil {
			return fmt.Errorf("outbox: register metrics: %w", err)
		}
	}
	return nil
}

// scan counts queued records and finds the last key.
func (o *Outbox) scan() (n int, last uint64, err error) {
	it, err := o.db.NewIter(nil)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox: scan: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if it.Last() {
		last = binary.BigEndian.Uint64(it.Key())
	}
	return n, last, nil
}

// Publish implements eventlog.Publisher: it queues ev's record durably and
// returns; the relay appends it to the log.
func (o *Outbox) Publish(ctx context.Context, ev eventlog.MessageEvent) error {
	r, err := ev.Record()
	if err != nil {
		return err
	}
	return o.Enqueue(ctx, r)
}

// Enqueue durably queues records in one synced write. It returns within
// EnqueueTimeout (or ctx) even if the disk stalls; then the records may or
// may not be queued.
func (o *Outbox) Enqueue(ctx context.Context, records ...eventlog.Record) error {
	if len(records) == 0 {
		return nil
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	b := o.db.NewBatch()
	for _, r := range records {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], o.seq)
		o.seq++
		if err := b.Set(k[:], encode(r), nil); err != nil {
			o.mu.Unlock()
			return fmt.Errorf("outbox: enqueue: %w", err)
		}
	}
	o.mu.Unlock()
	// Keys are taken in call order, so records enqueued one call after
	// another are relayed in that order. Concurrent calls may commit out of
	// key order; the relay deletes exactly the keys it appended, never a
	// range, so a late commit is never skipped.
	ctx, cancel := context.WithTimeout(ctx, o.cfg.EnqueueTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Commit(pebble.Sync) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("outbox: enqueue: %w", err)
		}
	case <-ctx.Done():
		// The commit goes on: when it lands, the relay is woken for it
		// rather than waiting for the next record's signal.
		go func() {
			if err := <-done; err == nil {
				o.queued(len(records))
			}
		}()
		return fmt.Errorf("outbox: enqueue not synced in time: %w", ctx.Err())
	}
	o.queued(len(records))
	return nil
}

// queued counts n committed records and wakes the relay.
func (o *Outbox) queued(n int) {
	o.pending.Add(float64(n))
	o.signal()
}

func (o *Outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// relay appends queued records to the log until ctx is cancelled.
func (o *Outbox) relay(ctx context.Context) {
	defer close(o.done)
	backoff := 50 * time.Millisecond
	for {
		n, err := o.relayOnce(ctx)
		switch {
		case err != nil:
			o.failures.Inc()
			o.cfg.Logger.Warn("outbox append failed; will retry", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, o.cfg.MaxBackoff)
			continue
		case n > 0:
			backoff = 50 * time.Millisecond
			continue
		}
		o.mu.Lock()
		close(o.drained)
		o.drained = make(chan struct{})
		o.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		}
	}
}

// relayOnce appends up to BatchSize records from the head of the queue and
// deletes them once acknowledged. It returns how many it published.
func (o *Outbox) relayOnce(ctx context.Context) (int, error) {
	it, err := o.db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("outbox: read queue: %w", err)
	}
	var (
		recs []eventlog.Record
		keys [][]byte
	)
	for ok := it.First(); ok && len(recs) < o.cfg.BatchSize; ok = it.Next() {
		r, err := decode(it.Value())
		if err != nil {
			it.Close()
			return 0, err
		}
		recs = append(recs, r)
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("outbox: read queue: %w", err)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	actx, cancel := context.WithTimeout(ctx, o.cfg.PublishTimeout)
	defer cancel()
	if err := o.log.Append(actx, recs...); err != nil {
		return 0, fmt.Errorf("outbox: append %d records: %w", len(recs), err)
	}
	// Not synced: after a crash the records are appended again, which
	// at-least-once allows.
	b := o.db.NewBatch()
	for _, k := range keys {
		b.Delete(k, nil)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, fmt.Errorf("outbox: dequeue: %w", err)
	}
	o.pending.Sub(float64(len(recs)))
	o.published.Add(float64(len(recs)))
	return len(recs), nil
}

// Flush waits until every record queued before the call, and every
// store outbox shard this process committed to before the call, has been
// appended to the log, or ctx ends.
func (o *Outbox) Flush(ctx context.Context) error {
	if err := o.flushStore(ctx); err != nil {
		return err
	}
	for {
		o.mu.Lock()
		ch := o.drained
		o.mu.Unlock()
		it, err := o.db.NewIter(nil)
		if err != nil {
			return fmt.Errorf("outbox: flush: %w", err)
		}
		empty := !it.First()
		it.Close()
		if empty {
			return nil
		}
		o.signal()
		select {
		case <-ctx.Done():
			return fmt.Errorf("outbox: flush: %w", ctx.Err())
		case <-ch:
		}
	}
}

// Close stops the relays and closes the queue. Queued records stay queued
// for the next New on the same Dir, and the store's outbox rows for the
// next relay of that store. It does not close the store.
func (o *Outbox) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	o.stop()
	<-o.done
	o.wg.Wait()
	if err := o.db.Close(); err != nil {
		return fmt.Errorf("outbox: close: %w", err)
	}
	return nil
}

// encode lays a record out as u16 topic length | topic | u32 key length |
// key | value.
func encode(r eventlog.Record) []byte {
	b := make([]byte, 0, 6+len(r.Topic)+len(r.Key)+len(r.Value))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Topic)))
	b = append(b, r.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Key)))
	b = append(b, r.Key...)
	return append(b, r.Value...)
}

func decode(b []byte) (eventlog.Record, error) {
	bad := fmt.Errorf("outbox: corrupt queue entry")
	if len(b) < 2 {
		return eventlog.Record{}, bad
	}
	tl := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) < tl+4 {
		return eventlog.Record{}, bad
	}
	topic := string(b[:tl])
	b = b[tl:]
	kl := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if len(b) < kl {
		return eventlog.Record{}, bad
	}
	return eventlog.Record{Topic: topic, Key: append([]byte(nil), b[:kl]...), Value: append([]byte(nil), b[kl:]...)}, nil
}
