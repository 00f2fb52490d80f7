package transport

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// ReadStateBackend is what a read-state node serves over ReadStateNode;
// *readstate.Service implements it, and so does NewReadStateClient.
type ReadStateBackend interface {
	// Ack moves user's read marker in channel to message
	// (readstate.Service.Ack).
	Ack(ctx context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error)
	// States lists user's read states; nil channels means every channel
	// the user has a record in (readstate.Service.States).
	States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error)
	// AddMentions counts user mentions handed over by a mention consumer
	// (readstate.Service.AddMentions); it returns once they are durable.
	AddMentions(ctx context.Context, ms []readstate.Mention) error
}

var _ ReadStateBackend = (*readstate.Service)(nil)

// readStateServer serves ReadStateNode on a read-state node.
type readStateServer struct {
	transportpb.UnimplementedReadStateNodeServer
	backend ReadStateBackend
	errs    errorTable
}

// Ack implements ReadStateNode.Ack.
func (s *readStateServer) Ack(ctx context.Context, req *transportpb.AckRequest) (*transportpb.AckResponse, error) {
	if req.UserId == 0 || req.ChannelId == 0 || req.MessageId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: ack without user, channel or message", ErrInvalid))
	}
	a, err := s.backend.Ack(ctx, snowflake.ID(req.UserId), snowflake.ID(req.ChannelId), snowflake.ID(req.MessageId))
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.AckResponse{
		ChannelId: uint64(a.ChannelID), MessageId: uint64(a.MessageID),
		MentionCount: int32(a.MentionCount), Version: a.Version,
	}, nil
}

// States implements ReadStateNode.States.
func (s *readStateServer) States(ctx context.Context, req *transportpb.StatesRequest) (*transportpb.StatesResponse, error) {
	if req.UserId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: states without a user", ErrInvalid))
	}
	var channels []snowflake.ID
	if !req.All {
		channels = idsFromPB(req.ChannelIds)
		if channels == nil {
			channels = []snowflake.ID{}
		}
	}
	states, err := s.backend.States(ctx, snowflake.ID(req.UserId), channels)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	out := make([]*transportpb.ReadState, len(states))
	for i, st := range states {
		out[i] = &transportpb.ReadState{
			ChannelId: uint64(st.ChannelID), LastReadId: uint64(st.LastReadID),
			MentionCount: int32(st.MentionCount), Flags: st.Flags,
		}
	}
	return &transportpb.StatesResponse{States: out}, nil
}

// AddMentions implements ReadStateNode.AddMentions.
func (s *readStateServer) AddMentions(ctx context.Context, req *transportpb.MentionsRequest) (*transportpb.MentionsResponse, error) {
	ms := make([]readstate.Mention, len(req.Mentions))
	for i, m := range req.Mentions {
		if m.UserId == 0 || m.ChannelId == 0 || m.MessageId == 0 || m.Offset < 0 {
			return nil, s.errs.toStatus(fmt.Errorf("%w: mention without user, channel, message or offset", ErrInvalid))
		}
		ms[i] = readstate.Mention{User: snowflake.ID(m.UserId), Channel: snowflake.ID(m.ChannelId),
			Message: snowflake.ID(m.MessageId), Offset: m.Offset, Removed: m.Removed}
	}
	if err := s.backend.AddMentions(ctx, ms); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.MentionsResponse{}, nil
}
