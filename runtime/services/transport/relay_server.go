package transport

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/attribute"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// relayServer serves RelayNode on a relay node: each request is split into
// one batch per gateway node and handed to the relay's sink (its
// GatewayClient) in stream order.
type relayServer struct {
	transportpb.UnimplementedRelayNodeServer
	sink event.Sink
	errs errorTable
	// slices are the session slices of sliced guilds (slice_server.go).
	slices *fanout.Relay
	// lease is how long slices outlive their owner process's last stream.
	lease time.Duration
}

// Relay forwards each request of the stream. A malformed request ends the
// stream.
func (s *relayServer) Relay(stream transportpb.RelayNode_RelayServer) error {
	ctx := stream.Context()
	var n uint64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&transportpb.RelayResponse{Requests: n})
		}
		if err != nil {
			return err
		}
		batches, ok := relayBatches(req)
		if !ok {
			return s.errs.toStatus(fmt.Errorf("%w: malformed %s relay request", ErrInvalid, req.Type))
		}
		n++
		relayReceived.Inc()
		rctx, span := ctx, noSpan
		if req.Traceparent != "" {
			rctx, span = tracing.Start(tracing.WithTraceparent(ctx, req.Traceparent), "relay.forward",
				attribute.String("event", req.Type), attribute.Int("nodes", len(batches)))
		}
		for i, b := range batches {
			s.sink.Deliver(rctx, req.Nodes[i].Node, b)
		}
		span.End()
	}
}

// relayBatches decodes a RelayRequest into one batch per node, sharing
// the payloads; ok is false when any node's targets are malformed or a
// node is unnamed.
func relayBatches(req *transportpb.RelayRequest) ([]event.Batch, bool) {
	out := make([]event.Batch, len(req.Nodes))
	for i, nd := range req.Nodes {
		if nd.Node == "" {
			return nil, false
		}
		nd.Type, nd.Payloads = req.Type, req.Payloads
		b, ok := batchFromPB(nd)
		if !ok {
			return nil, false
		}
		out[i] = b
	}
	if len(out) > 1 {
		// Every batch shares the first one's decoded payloads.
		for i := 1; i < len(out); i++ {
			out[i].Payloads = out[0].Payloads
		}
	}
	return out, true
}

var (
	relaySent = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_transport_relay_requests_total",
		Help: "Relay requests (one dispatch for several gateway nodes) this guild node sent to relays, by result (sent, failed).",
	}, []string{"result"})
	relayReceived = promauto.NewCounter(prometheus.CounterOpts{
		Name: "concord_transport_relay_received_requests_total",
		Help: "Relay requests this relay node received from guild nodes.",
	})
	sliceReceived = promauto.NewCounter(prometheus.CounterOpts{
		Name: "concord_transport_slice_received_entries_total",
		Help: "Sliced-guild entries this relay node received from guild owners.",
	})
	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "concord_transport_slice_guilds",
		Help: "Sliced guilds this relay node holds a slice of.",
	}, func() float64 { return float64(sliceRelays.sum((*fanout.Relay).Len)) })
	_ = promauto.NewCounterFunc(prometheus.CounterOpts{
		Name: "concord_transport_slice_expired_total",
		Help: "Slices this relay node dropped because their owner process had no stream open to it for the lease (a guild node killed without sending Drop).",
	}, func() float64 { return float64(sliceRelays.sum(func(r *fanout.Relay) int { return int(r.Expired()) })) })
	sliceSent = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_transport_slice_entries_total",
		Help: "Sliced-guild entries this guild node sent to relays, by result (sent, behind, failed).",
	}, []string{"result"})
)

// relaySet is the process's relays, for the slice gauges: one in a relay
// process, several in tests that run nodes in one process.
type relaySet struct {
	mu     sync.Mutex
	relays []*fanout.Relay
}

var sliceRelays relaySet

func (s *relaySet) add(r *fanout.Relay) {
	s.mu.Lock()
	s.relays = append(s.relays, r)
	s.mu.Unlock()
}

func (s *relaySet) sum(f func(*fanout.Relay) int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.relays {
		n += f(r)
	}
	return n
}
