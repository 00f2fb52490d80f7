package gateway

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	viewers                                                                 prometheus.Gauge
	subscribes, unsubscribes, batches, invalid, gaps, gapsSent, recentReads prometheus.Counter
	resumes, slowCut, drained                                               prometheus.Counter
	flushAge, postToFlush, relayAge, takedown                               prometheus.Histogram
	flushDone                                                               *prometheus.HistogramVec
	friendFetches                                                           *prometheus.CounterVec
	impressions, removedImpressions                                         prometheus.Counter
}

// sizeLabel buckets a stream by its viewers on this gateway, for the
// latency by stream size.
func sizeLabel(viewers int) string {
	switch {
	case viewers < 100:
		return "1-99"
	case viewers < 10_000:
		return "100-9999"
	default:
		return "10000+"
	}
}

func newMetrics(reg prometheus.Registerer) metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_live_gateway_" + name, Help: help})
	}
	m := metrics{
		viewers:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_live_gateway_viewers", Help: "Open SSE viewer connections."}),
		subscribes:   c("subscribes_total", "Stream topic subscriptions."),
		unsubscribes: c("unsubscribes_total", "Stream topic unsubscriptions."),
		batches:      c("batches_total", "Relay batches received."),
		invalid:      c("invalid_batches_total", "Relay messages that did not decode."),
		gaps:         c("gap_refills_total", "Sequence gaps refilled from the recent cache."),
		recentReads:  c("recent_reads_total", "Reads of the recent cache: one per stream subscription, one per refilled gap — never one per viewer."),
		gapsSent:     c("gaps_sent_total", "Resumes answered with a gap and a fresh snapshot."),
		resumes:      c("resumes_total", "Last-Event-ID resumes served from the ring."),
		drained:      c("drained_viewers_total", "Viewers sent to reconnect elsewhere (with a jittered retry) by a draining gateway."),
		slowCut:      c("slow_viewers_cut_total", "Viewers cut for falling too far behind: more than the pending bound queued, or a write the socket did not take within the write timeout."),
		flushAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_gateway_flush_age_seconds",
			Help: "Time frames waited in a viewer's queue before the flush.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 12)}),
		postToFlush: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_gateway_post_to_flush_seconds",
			Help: "Time from the API accepting an event to its flush to a viewer.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		relayAge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_gateway_relay_age_seconds",
			Help: "Time from the API accepting a batch's first event to the gateway receiving the batch from the relay.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		flushDone: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "concord_live_gateway_post_to_flush_done_seconds",
			Help:    "Time from the API accepting a flush's oldest event to the end of the flush's writes, by the stream's viewers on this gateway.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"viewers"}),
		takedown: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_live_gateway_takedown_seconds",
			Help:    "Time from a comment's post (its id's time) to its retraction reaching this gateway, once per retraction applied (moderators, authors and the classifier alike).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		impressions: c("comment_impressions_total", "Comments written to viewers (one per viewer shown one)."),
		removedImpressions: c("removed_comment_impressions_total",
			"Retractions written to viewers who had been shown the comment: impressions of comments later removed. Exposure per million = 1e6 * this / comment_impressions_total."),
		friendFetches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_live_gateway_friend_fetches_total",
			Help: "Friend lists fetched at a viewer's join for the friends boost, by result (ok, error: that viewer gets no boost)."}, []string{"result"}),
	}
	// Every stream size exists from the start, so the post-to-screen
	// panel by size has its series before the first big stream.
	for _, n := range []int{1, 100, 10_000} {
		m.flushDone.WithLabelValues(sizeLabel(n))
	}
	if reg != nil {
		reg.MustRegister(m.viewers, m.subscribes, m.unsubscribes, m.batches, m.invalid, m.gaps, m.gapsSent, m.recentReads, m.resumes, m.slowCut, m.drained, m.flushAge, m.postToFlush, m.relayAge,
			m.takedown, m.flushDone, m.friendFetches, m.impressions, m.removedImpressions)
	}
	return m
}
