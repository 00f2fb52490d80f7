package transport

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	serverHandled = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_transport_server_handled_total",
		Help: "RPCs completed by this node's gRPC server, by method and status code.",
	}, []string{"method", "code"})
	serverSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "concord_transport_server_handling_seconds",
		Help:    "Time this node's gRPC server spent on an RPC (streams: their whole life).",
		Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5},
	}, []string{"method"})
	clientCalls = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_transport_client_calls_total",
		Help: "Guild RPCs made by this node, by method and result (ok, retried, error).",
	}, []string{"method", "result"})
	deliverBatches = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_transport_deliver_batches_total",
		Help: "Batches handed to gateway nodes by this node, by result (sent, dropped).",
	}, []string{"result"})
	deliverReceived = promauto.NewCounter(prometheus.CounterOpts{
		Name: "concord_transport_deliver_received_batches_total",
		Help: "Batches this gateway node received from guild nodes.",
	})
)
