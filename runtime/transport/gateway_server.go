package transport

import (
	"errors"
	"fmt"
	"io"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/transport/transportpb"
)

// gatewayServer serves GatewayNode on a gateway node.
type gatewayServer struct {
	transportpb.UnimplementedGatewayNodeServer
	node string
	sink event.Sink
	errs errorTable
}

// Deliver hands each batch of the stream to the local sink in stream
// order. A batch for another node or a malformed one ends the stream.
func (s *gatewayServer) Deliver(stream transportpb.GatewayNode_DeliverServer) error {
	ctx := stream.Context()
	var n uint64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&transportpb.DeliverResponse{Batches: n})
		}
		if err != nil {
			return err
		}
		if req.Node != s.node {
			return s.errs.toStatus(fmt.Errorf("%w: %q reached %q", ErrWrongNode, req.Node, s.node))
		}
		b, ok := batchFromPB(req)
		if !ok {
			return s.errs.toStatus(fmt.Errorf("%w: malformed %s batch", ErrInvalid, req.Type))
		}
		n++
		deliverReceived.Inc()
		s.sink.Deliver(ctx, s.node, b)
	}
}
