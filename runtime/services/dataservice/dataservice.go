// Package dataservice is the data service role (--roles=data): a thin
// layer between the API and the messages store.
//
// Every read and write of a channel goes to the one instance that owns the
// channel on a consistent-hash ring (Router), so one instance sees all of
// a channel's traffic and merges identical reads in flight: the first
// request runs the query, the others wait for its rows (Service). When
// 30,000 people open the same channel within seconds, the store sees a
// handful of queries instead of 30,000.
//
// A finished query's rows also stay joinable for a short linger (10ms by
// default), so arrivals right after a fast query share it too.
//
// Reads stay read-your-writes: a read joins a query only if no write to
// its channel completed since that query started (each completed write
// bumps the channel's generation, and the generation is part of the
// coalescing key).
//
// The service holds no durable state: it is a cache of work in flight.
// When an instance dies, its waiters get an error wrapping
// store.ErrUnavailable, the ring moves its channels to another instance,
// and the Router retries there.
package dataservice

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Config configures a Service.
type Config struct {
	// Name identifies the instance in logs. Default: "data".
	Name string
	// QueryTimeout bounds one store query run on behalf of its waiters
	// (it does not end when the request that started it gives up).
	// Default: 10s.
	QueryTimeout time.Duration
	// DisableCoalescing runs every read as its own query (for comparison
	// and debugging).
	DisableCoalescing bool
	// Linger keeps a finished read's rows joinable for this long, so that
	// requests arriving right after a query finished share it too. A write
	// to the channel through this instance ends the window at once (the
	// write generation is part of the key); writes that bypass the data
	// service are seen at most Linger late. Negative: merge only reads in
	// flight. Default: 10ms.
	Linger time.Duration
	// TopChannels is how many channels the top-channels counter tracks.
	// Default: 64.
	TopChannels int
	// Logger. Default: slog.Default().
	Logger *slog.Logger
}

// Metrics, shared by the Services of a process, by operation (get, list,
// buckets, put, delete, delete_bulk).
var (
	requestsIn = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_dataservice_requests_total",
		Help: "Requests received by the data service.",
	}, []string{"op"})
	queriesOut = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_dataservice_queries_total",
		Help: "Queries the data service sent to the store.",
	}, []string{"op"})
	coalescedReqs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_dataservice_coalesced_total",
		Help: "Read requests that joined an identical query in flight (share = coalesced / requests).",
	}, []string{"op"})
	inFlightQueries = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "concord_dataservice_inflight_queries",
		Help: "Read queries in flight in the store.",
	})
	requestSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "concord_dataservice_request_duration_seconds",
		Help:    "Request latency seen by the data service, coalesced waits included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"op"})
)

// Stats are one instance's counters since it started.
type Stats struct {
	// Requests is every request received; Reads the read requests.
	Requests, Reads uint64
	// Queries is every query sent to the store.
	Queries uint64
	// Coalesced is the read requests that joined a query in flight.
	Coalesced uint64
}

// CoalescedShare is Coalesced / Reads (0 without reads).
func (s Stats) CoalescedShare() float64 {
	if s.Reads == 0 {
		return 0
	}
	return float64(s.Coalesced) / float64(s.Reads)
}

// readKey identifies identical reads.
type readKey struct {
	op      byte // 'g' get, 'l' list, 'b' buckets
	channel snowflake.ID
	id      snowflake.ID // GetMessage
	q       store.HistoryQuery
	gen     uint64
}

type readResult struct {
	msgs    []store.Message
	msg     store.Message
	buckets []int64
}

// Service serves one instance's share of channels from a store,
// coalescing identical reads. It implements store.Messages; slices it
// returns from a coalesced read are shared between the waiters and must be
// treated as read-only (the top-level slice is each caller's own).
type Service struct {
	cfg   Config
	store store.Messages
	log   *slog.Logger

	flights flightGroup[readKey, readResult]
	// gens are write generations, striped by channel: a completed write
	// bumps its stripe. Memory stays bounded; a write to another channel
	// of the same stripe only costs a query that could have been shared.
	gens [4096]atomic.Uint64
	top  *topK

	requests, reads, queries, coalesced atomic.Uint64

	stop      chan struct{}
	closeOnce sync.Once
}

var _ store.Messages = (*Service)(nil)

// New returns a Service over st.
func New(st store.Messages, cfg Config) *Service {
	if cfg.Name == "" {
		cfg.Name = "data"
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 10 * time.Second
	}
	if cfg.TopChannels <= 0 {
		cfg.TopChannels = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{
		cfg:   cfg,
		store: st,
		log:   cfg.Logger.With("component", "dataservice", "instance", cfg.Name),
		top:   newTopK(cfg.TopChannels),
		stop:  make(chan struct{}),
	}
	switch {
	case cfg.Linger == 0:
		s.flights.linger = 10 * time.Millisecond
	case cfg.Linger > 0:
		s.flights.linger = cfg.Linger
	}
	return s
}

// Close stops the instance: requests waiting on it and every later
// request fail with ErrClosed. It does not close the store.
func (s *Service) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	return nil
}

func (s *Service) closed() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// Stats returns the instance's counters.
func (s *Service) Stats() Stats {
	return Stats{Requests: s.requests.Load(), Reads: s.reads.Load(), Queries: s.queries.Load(), Coalesced: s.coalesced.Load()}
}

// TopChannels returns up to n channels with the most requests.
func (s *Service) TopChannels(n int) []ChannelStat { return s.top.top(n) }

func (s *Service) gen(ch snowflake.ID) *atomic.Uint64 {
	h := uint64(ch) * 0x9E3779B97F4A7C15 // Fibonacci hashing: low id bits vary little
	return &s.gens[h>>(64-12)]
}

// read runs (or joins) the read identified by k.
func (s *Service) read(ctx context.Context, op string, k readKey, fn func(context.Context) (readResult, error)) (readResult, error) {
	start := time.Now()
	s.requests.Add(1)
	s.reads.Add(1)
	requestsIn.WithLabelValues(op).Inc()
	if s.closed() {
		return readResult{}, ErrClosed
	}
	run := func(ctx context.Context) (readResult, error) {
		s.queries.Add(1)
		queriesOut.WithLabelValues(op).Inc()
		inFlightQueries.Inc()
		defer inFlightQueries.Dec()
		return fn(ctx)
	}
	var res readResult
	var shared bool
	var err error
	if s.cfg.DisableCoalescing {
		res, err = run(ctx)
	} else {
		k.gen = s.gen(k.channel).Load()
		work, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.QueryTimeout)
		res, shared, err = s.flights.do(ctx, work, s.stop, ErrClosed, k, func(ctx context.Context) (readResult, error) {
			defer cancel()
			return run(ctx)
		})
		if shared {
			cancel() // this caller's timer is not the one the query uses
			s.coalesced.Add(1)
			coalescedReqs.WithLabelValues(op).Inc()
		}
	}
	s.top.add(k.channel, shared)
	requestSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	return res, err
}

// write runs a write and bumps the channel's generation when it is done,
// so reads that arrive afterwards never join a query that started before.
func (s *Service) write(ctx context.Context, op string, ch snowflake.ID, fn func(context.Context) error) error {
	start := time.Now()
	s.requests.Add(1)
	requestsIn.WithLabelValues(op).Inc()
	if s.closed() {
		return ErrClosed
	}
	s.queries.Add(1)
	queriesOut.WithLabelValues(op).Inc()
	err := fn(ctx)
	s.gen(ch).Add(1)
	s.top.add(ch, false)
	requestSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	return err
}

// ListMessages returns a page of history, joining an identical read in
// flight when there is one.
func (s *Service) ListMessages(ctx context.Context, ch snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	res, err := s.read(ctx, "list", readKey{op: 'l', channel: ch, q: q}, func(ctx context.Context) (readResult, error) {
		msgs, err := s.store.ListMessages(ctx, ch, q)
		return readResult{msgs: msgs}, err
	})
	if err != nil {
		return nil, err
	}
	return append([]store.Message(nil), res.msgs...), nil
}

// GetMessage reads one message, joining an identical read in flight.
func (s *Service) GetMessage(ctx context.Context, ch, id snowflake.ID) (store.Message, error) {
	res, err := s.read(ctx, "get", readKey{op: 'g', channel: ch, id: id}, func(ctx context.Context) (readResult, error) {
		m, err := s.store.GetMessage(ctx, ch, id)
		return readResult{msg: m}, err
	})
	return res.msg, err
}

// Buckets lists the channel's non-empty buckets, joining an identical
// read in flight.
func (s *Service) Buckets(ctx context.Context, ch snowflake.ID) ([]int64, error) {
	res, err := s.read(ctx, "buckets", readKey{op: 'b', channel: ch}, func(ctx context.Context) (readResult, error) {
		b, err := s.store.Buckets(ctx, ch)
		return readResult{buckets: b}, err
	})
	if err != nil {
		return nil, err
	}
	return append([]int64(nil), res.buckets...), nil
}

// PutMessage writes a message through to the store.
func (s *Service) PutMessage(ctx context.Context, m store.Message) error {
	return s.write(ctx, "put", m.ChannelID, func(ctx context.Context) error { return s.store.PutMessage(ctx, m) })
}

// DeleteMessage deletes a message in the store.
func (s *Service) DeleteMessage(ctx context.Context, ch, id snowflake.ID) error {
	return s.write(ctx, "delete", ch, func(ctx context.Context) error { return s.store.DeleteMessage(ctx, ch, id) })
}

// DeleteMessages deletes many messages of a channel in the store.
func (s *Service) DeleteMessages(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	return s.write(ctx, "delete_bulk", ch, func(ctx context.Context) error { return s.store.DeleteMessages(ctx, ch, ids) })
}
