package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// gatewayServer serves GatewayNode on a gateway node.
type gatewayServer struct {
	transportpb.UnimplementedGatewayNodeServer
	node     string
	sink     event.Sink
	sessions SessionBackend
	errs     errorTable
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
		if req.Traceparent == "" {
			s.sink.Deliver(ctx, s.node, b)
			continue
		}
		// A sampled batch: the gateway node's stamping and socket writes
		// as one span of the sender's trace.
		dctx, span := tracing.Start(tracing.WithTraceparent(ctx, req.Traceparent), "gateway.write",
			attribute.String("event", b.Type), attribute.Int("sessions", len(b.Targets)))
		s.sink.Deliver(dctx, s.node, b)
		span.End()
	}
}

// maxDirectoryUsers bounds the users of one UserSessions request.
const maxDirectoryUsers = 1024

// UserSessions answers the session directory's lookup from the node's
// SessionBackend.
func (s *gatewayServer) UserSessions(ctx context.Context, req *transportpb.UserSessionsRequest) (*transportpb.UserSessionsResponse, error) {
	if s.sessions == nil {
		return nil, status.Error(codes.Unimplemented, "transport: this gateway node serves no session directory")
	}
	if len(req.UserIds) > maxDirectoryUsers {
		return nil, s.errs.toStatus(fmt.Errorf("%w: %d users in one lookup (at most %d)", ErrInvalid, len(req.UserIds), maxDirectoryUsers))
	}
	users := make([]snowflake.ID, len(req.UserIds))
	for i, u := range req.UserIds {
		users[i] = snowflake.ID(u)
	}
	found := s.sessions.UserSessions(ctx, users)
	res := &transportpb.UserSessionsResponse{Sessions: make([]*transportpb.Session, len(found))}
	for i, sess := range found {
		res.Sessions[i] = sessionToPB(sess)
	}
	return res, nil
}

// SubscribeGuild subscribes one of the node's sessions to a guild.
func (s *gatewayServer) SubscribeGuild(ctx context.Context, req *transportpb.SubscribeGuildRequest) (*transportpb.SubscribeGuildResponse, error) {
	if s.sessions == nil {
		return nil, status.Error(codes.Unimplemented, "transport: this gateway node serves no session directory")
	}
	if req.SessionId == "" || req.GuildId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: subscribe guild needs a session and a guild", ErrInvalid))
	}
	found, err := s.sessions.SubscribeGuild(ctx, event.SessionID(req.SessionId), snowflake.ID(req.GuildId))
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.SubscribeGuildResponse{Found: found}, nil
}
