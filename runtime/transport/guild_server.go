package transport

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport/transportpb"
)

// guildServer serves GuildNode on a guild node. Each handler checks the
// request, checks ownership, calls the backend and maps its error once.
type guildServer struct {
	transportpb.UnimplementedGuildNodeServer
	backend GuildBackend
	owns    func(snowflake.ID) bool
	errs    errorTable
}

// check validates the guild id and this node's ownership of it.
func (s *guildServer) check(guildID uint64) (snowflake.ID, error) {
	if guildID == 0 {
		return 0, fmt.Errorf("%w: zero guild id", ErrInvalid)
	}
	id := snowflake.ID(guildID)
	if s.owns != nil && !s.owns(id) {
		return 0, fmt.Errorf("%w: guild %d", ErrNotOwner, id)
	}
	return id, nil
}

// Subscribe implements GuildNode.Subscribe.
func (s *guildServer) Subscribe(ctx context.Context, req *transportpb.SubscribeRequest) (*transportpb.SubscribeResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	sess, ok := sessionFromPB(req.Session)
	if !ok {
		return nil, s.errs.toStatus(fmt.Errorf("%w: subscribe without a session", ErrInvalid))
	}
	if err := s.backend.Subscribe(ctx, id, sess); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.SubscribeResponse{}, nil
}

// Disconnect implements GuildNode.Disconnect.
func (s *guildServer) Disconnect(ctx context.Context, req *transportpb.DisconnectRequest) (*transportpb.DisconnectResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	sess, ok := sessionFromPB(req.Session)
	if !ok {
		return nil, s.errs.toStatus(fmt.Errorf("%w: disconnect without a session", ErrInvalid))
	}
	if err := s.backend.Disconnect(ctx, id, sess); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.DisconnectResponse{}, nil
}

// Call implements GuildNode.Call.
func (s *guildServer) Call(ctx context.Context, req *transportpb.CallRequest) (*transportpb.CallResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if req.Method == "" {
		return nil, s.errs.toStatus(fmt.Errorf("%w: call without a method", ErrInvalid))
	}
	status, body, err := s.backend.Call(ctx, id, req.Method, req.Body)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.CallResponse{Status: int32(status), Body: body}, nil
}
