package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// sliceClientKey is the stream metadata naming the owner process that
// opened a Slice stream (SliceClient's id): the relay ties the slices of
// that process's guilds to it, and drops them when it has had no stream
// open for the lease (fanout.Stream.End).
const sliceClientKey = "concord-slice-client"

// DefaultSliceLease is Services.SliceLease's default: how long a relay
// keeps the slices of an owner process that has no stream open to it.
const DefaultSliceLease = 5 * time.Second

// Slice applies a sliced guild's entries to the relay's slices
// (runtime/domain/fanout), which deliver to gateway nodes through the relay's
// sink. A slice that is behind ends the stream with FAILED_PRECONDITION.
// When the stream ends for any reason, the owner process's slices expire
// unless it opens another within the lease: a guild node killed outright
// sends no Drop.
func (s *relayServer) Slice(stream transportpb.RelayNode_SliceServer) error {
	ctx := stream.Context()
	var client string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(sliceClientKey); len(v) > 0 {
			client = v[0]
		}
	}
	owner := s.slices.Open(client)
	defer owner.End(s.lease)
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
		if err := owner.Apply(ctx, &e); errors.Is(err, fanout.ErrBehind) {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
	}
}
