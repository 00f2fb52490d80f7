package router

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	batches, events, invalid, cacheErrors, publishErrors prometheus.Counter
	batchAge, logAge, acceptToPublish, copies            prometheus.Histogram
	sampledStreams                                       prometheus.Gauge
	reactions, trustedOnly                               prometheus.Counter
	tiers                                                *prometheus.CounterVec
	// takedowns counts retractions by what the router did with them
	// (takedown.go): applied, duplicate, refused, unknown.
	takedowns *prometheus.CounterVec
	// releasedScored and releasedHold count the held events of sampled
	// streams by what let them go: the classifier's scored mark, or the
	// whole hold passing (concord_live_router_held_released_total{by}).
	releasedScored, releasedHold prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_router_" + name, Help: help})
	}
	m := metrics{
		batches:       c("batches_total", "Batches published to the relay."),
		events:        c("events_total", "Events published to the relay."),
		invalid:       c("invalid_records_total", "Log records skipped because they do not decode."),
		cacheErrors:   c("recent_cache_errors_total", "Failed writes to the recent cache."),
		publishErrors: c("publish_errors_total", "Failed relay publishes."),
		batchAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_router_batch_age_seconds",
			Help:    "Time from a batch's first event reaching the router to its publish.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12)}),
		logAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_router_log_age_seconds",
			Help:    "Time from the API accepting an event to the router reading it from the event log.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		acceptToPublish: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_router_accept_to_publish_seconds",
			Help:    "Time from the API accepting an event to the router publishing its batch to the relay.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		trustedOnly: c("trusted_only_batches_total", "Batches of sampled streams tiered while the classifier lagged: their sample drawn only from trusted authors."),
		reactions:   c("reaction_batches_total", "Reaction batches (requests) read from the reactions topic; their rate is the reactions ingest."),
		copies: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_router_relay_copies",
			Help:    "Backbone copies of one batch of comments: the gateways subscribed to its stream (the ideal is the gateways its viewers sit on, never the viewers).",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256}}),
		sampledStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_live_router_sampled_streams",
			Help: "Streams of the owned partitions in sampled mode."}),
		tiers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_router_sampled_comments_total",
			Help: "Comments of sampled streams published, by tier (pinned, sample, rest)."}, []string{"tier"}),
		takedowns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_router_takedowns_total",
			Help: "Retractions read from the log, by outcome: applied (published), duplicate (comment taken down already), refused (an unresolved takedown by someone who may not), unknown (no such comment known)."},
			[]string{"outcome"}),
	}
	released := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_router_held_released_total",
		Help: "Events of sampled streams the router held for the classifier, by what released them: scored (the moderation consumer's mark said their verdicts were in) or hold (the whole hold passed first)."},
		[]string{"by"})
	m.releasedScored, m.releasedHold = released.WithLabelValues("scored"), released.WithLabelValues("hold")
	if reg != nil {
		reg.MustRegister(m.batches, m.events, m.invalid, m.cacheErrors, m.publishErrors, m.batchAge, m.logAge, m.acceptToPublish,
			m.sampledStreams, m.tiers, m.reactions, m.copies, m.trustedOnly, m.takedowns, released)
	}
	return m
}
