package readstate

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus collectors, plus plain counters
// for Stats.
type metrics struct {
	nEvents, nMentions, nDuplicates, nWritten atomic.Int64

	acks         prometheus.Counter
	events       prometheus.Counter
	mentions     prometheus.Counter
	duplicates   prometheus.Counter
	loads        prometheus.Counter
	written      prometheus.Counter
	commits      prometheus.Counter
	claims       prometheus.Counter
	fenced       prometheus.Counter
	flushSeconds prometheus.Histogram
	// lag is the consumer's lag in time: how long ago the log accepted
	// the record being applied.
	lag prometheus.Histogram
}

func (m *metrics) init(reg prometheus.Registerer) error {
	m.acks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_acks_total", Help: "Acks applied."})
	m.events = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_events_total", Help: "Message events consumed from the event log."})
	m.mentions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_mentions_total", Help: "Per-user mention counts incremented."})
	m.duplicates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_duplicate_events_total", Help: "Events dropped because their message was already counted."})
	m.loads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_user_loads_total", Help: "Users loaded from the store on a cache miss."})
	m.written = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_records_written_total", Help: "Records written to the store."})
	m.commits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_group_commits_total", Help: "Group commits of acks and mentions (one store write each)."})
	m.claims = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_claims_total", Help: "Users' records claimed at this node's owner epoch."})
	m.fenced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_readstate_fenced_writes_total", Help: "User writes the store refused because a later owner claimed the user."})
	m.flushSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "concord_readstate_flush_duration_seconds", Help: "Duration of store writes (group commits and flushes).", Buckets: prometheus.DefBuckets})
	m.lag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "concord_readstate_consumer_lag_seconds", Help: "Time from the event log accepting a message event to this node applying it.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.acks, m.events, m.mentions, m.duplicates, m.loads, m.written, m.commits, m.claims, m.fenced, m.flushSeconds, m.lag} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("readstate: register metrics: %w", err)
		}
	}
	return nil
}

// Stats are counters of a Service since New.
type Stats struct {
	// Events is the number of message events applied (including
	// duplicates and replays).
	Events int64
	// Mentions is the number of per-user mention increments.
	Mentions int64
	// Duplicates is the number of events dropped as already counted.
	Duplicates int64
	// Written is the number of records written to the store.
	Written int64
}

// Stats returns the service's counters.
func (s *Service) Stats() Stats {
	return Stats{Events: s.m.nEvents.Load(), Mentions: s.m.nMentions.Load(), Duplicates: s.m.nDuplicates.Load(), Written: s.m.nWritten.Load()}
}
