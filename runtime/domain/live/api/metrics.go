package api

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	accepted  prometheus.Counter
	rejected  *prometheus.CounterVec
	shadowed  *prometheus.CounterVec
	retracted prometheus.Counter
	filter    prometheus.Histogram
	// callerCache counts lookups of verified tokens and accounts
	// (callers.go) by kind and result.
	callerCache *prometheus.CounterVec
	// takedownsDeferred are takedowns appended unresolved, their comment
	// not readable yet (accepted.go).
	takedownsDeferred prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_api_comments_accepted_total",
			Help: "Comments appended to the event log."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_api_comments_rejected_total",
			Help: "Comments the sync filter rejected, by reason."}, []string{"reason"}),
		shadowed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_api_comments_shadowed_total",
			Help: "Comments shadow-accepted, by reason."}, []string{"reason"}),
		retracted: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_api_retractions_total",
			Help: "Retractions appended (author, moderator, report, ban)."}),
		filter: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_api_filter_seconds",
			Help: "Time of the sync filter check.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14)}),
		callerCache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_api_caller_cache_total",
			Help: "Lookups of recently verified tokens (kind token) and authors' accounts (kind account), by result (hit, miss)."},
			[]string{"kind", "result"}),
		takedownsDeferred: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_api_takedowns_deferred_total",
			Help: "Takedowns appended unresolved (their comment, accepted moments ago on another API instance, was only in the log), for the router and archiver to apply in log order."}),
	}
	if reg != nil {
		reg.MustRegister(m.accepted, m.rejected, m.shadowed, m.retracted, m.filter, m.callerCache, m.takedownsDeferred)
	}
	return m
}
