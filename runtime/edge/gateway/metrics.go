package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a node's Prometheus collectors.
type metrics struct {
	sessions           prometheus.Gauge
	connections        prometheus.Gauge
	deliveries         prometheus.Counter
	resumes            prometheus.Counter
	invalidSessions    prometheus.Counter
	slowConsumerCloses prometheus.Counter
	zombieCloses       prometheus.Counter
	replayBufferBytes  prometheus.Gauge
	closes             *prometheus.CounterVec
	// Send-queue pressure by application (pressure.go); pressureApps
	// bounds the application_id values.
	bufferPressure         *prometheus.CounterVec
	bufferPressureSessions *prometheus.GaugeVec
	pressureApps           *appLabels
	// deliveryAge is send-to-socket latency of MESSAGE_CREATE
	// (deliveryage.go).
	deliveryAge prometheus.Histogram
	// sentBytes is the bytes written per dispatch event name: what
	// presence (or any one event) costs the sockets.
	sentBytes *prometheus.CounterVec
	// compressorsActive counts stream compression contexts holding an
	// encoder; compressorParks counts encoders given back by idle ones
	// (compress.go).
	compressorsActive prometheus.Gauge
	compressorParks   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, node string) (*metrics, error) {
	labels := prometheus.Labels{"node": node}
	m := &metrics{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_gateway_sessions", Help: "Sessions held, attached or waiting for RESUME.", ConstLabels: labels}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_gateway_connections", Help: "Open gateway WebSocket connections.", ConstLabels: labels}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_gateway_deliveries_total", Help: "Dispatches stamped for a session.", ConstLabels: labels}),
		resumes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_gateway_resumes_total", Help: "Successful RESUMEs.", ConstLabels: labels}),
		invalidSessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_gateway_invalid_sessions_total", Help: "INVALID_SESSION (op 9) answers.", ConstLabels: labels}),
		slowConsumerCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_gateway_slow_consumer_closes_total", Help: "Connections closed because their send queue passed its bound.", ConstLabels: labels}),
		zombieCloses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_gateway_zombie_closes_total", Help: "Connections closed for missing heartbeats.", ConstLabels: labels}),
		replayBufferBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_gateway_replay_buffer_bytes", Help: "Bytes of dispatch frames held in replay buffers.", ConstLabels: labels}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_gateway_server_closes_total", Help: "Connections closed by the node, by close code.", ConstLabels: labels}, []string{"code"}),
		bufferPressure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "concord_gateway_buffer_pressure_total",
			Help:        "Times a connection's send queue reached 80 % of its bound, by application (bot user id; \"user\" for people, \"other\" past the label bound).",
			ConstLabels: labels}, []string{"application_id"}),
		bufferPressureSessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "concord_gateway_buffer_pressure_sessions",
			Help:        "Connections whose send queue is at or above 80 % of its bound and has not fallen back to 50 %, by application.",
			ConstLabels: labels}, []string{"application_id"}),
		pressureApps: newAppLabels(MaxPressureApplications),
		deliveryAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "concord_gateway_delivery_age_seconds",
			Help: "Time from a message's creation (its snowflake id, stamped by the API node that stored it) to the " +
				"write of its MESSAGE_CREATE to a session's socket, once per session written.",
			Buckets:     []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
			ConstLabels: labels}),
		sentBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_gateway_sent_bytes_total",
			Help: "Bytes of dispatch frames written to sockets (after compression), by event name: the events " +
				"that dominate it (PRESENCE_UPDATE, say) are where bandwidth goes.",
			ConstLabels: labels}, []string{"event"}),
		compressorsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_gateway_stream_encoders",
			Help: "zlib-stream and zstd-stream connections holding an encoder; an idle one gives it back to a pool " +
				"and continues its stream with a fresh encoder when it next sends.",
			ConstLabels: labels}),
		compressorParks: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "concord_gateway_stream_encoder_parks_total",
			Help:        "Encoders given back to the pool by stream-compressed connections idle for the compress-idle time.",
			ConstLabels: labels}),
	}
	// People's pressure series exist from the start at 0, so the alert
	// and dashboard over them have a series before the first pressure.
	m.bufferPressure.WithLabelValues(PressureUserLabel)
	m.bufferPressureSessions.WithLabelValues(PressureUserLabel)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.sessions, m.connections, m.deliveries, m.resumes, m.invalidSessions,
		m.slowConsumerCloses, m.zombieCloses, m.replayBufferBytes, m.closes, m.bufferPressure, m.bufferPressureSessions,
		m.deliveryAge, m.sentBytes, m.compressorsActive, m.compressorParks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	return m, nil
}
