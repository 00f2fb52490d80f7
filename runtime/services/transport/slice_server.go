package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// Slice applies a sliced guild's entries to the relay's slices
// (runtime/domain/fanout), which deliver to gateway nodes through the relay's
// sink. A slice that is behind ends the stream with FAILED_PRECONDITION.
func (s *relayServer) Slice(stream transportpb.RelayNode_SliceServer) error {
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
		var e fanout.Entry
		if err := json.Unmarshal(req.Entry, &e); err != nil {
			return s.errs.toStatus(fmt.Errorf("%w: malformed slice entry: %w", ErrInvalid, err))
		}
		n++
		sliceReceived.Inc()
		if err := s.slices.Apply(ctx, &e); errors.Is(err, fanout.ErrBehind) {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
	}
}
