package transport

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
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
	subscribe := s.backend.Subscribe
	if req.Moved {
		subscribe = func(ctx context.Context, id snowflake.ID, sess event.Session) error {
			return s.backend.SubscribeMoved(ctx, id, sess, req.Refresh)
		}
	}
	if err := subscribe(ctx, id, sess); err != nil {
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

// MoveSession implements GuildNode.MoveSession.
func (s *guildServer) MoveSession(ctx context.Context, req *transportpb.MoveSessionRequest) (*transportpb.MoveSessionResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if req.SessionId == "" || req.To == "" || req.MoveId == "" {
		return nil, s.errs.toStatus(fmt.Errorf("%w: move without a session, node or move id", ErrInvalid))
	}
	n, err := s.backend.MoveSession(ctx, id, guild.Move{Session: event.SessionID(req.SessionId), To: req.To, ID: req.MoveId})
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.MoveSessionResponse{Markers: int32(n)}, nil
}

// CanView implements GuildNode.CanView.
func (s *guildServer) CanView(ctx context.Context, req *transportpb.CanViewRequest) (*transportpb.CanViewResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if req.UserId == 0 || req.ChannelId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: visibility without a user or channel", ErrInvalid))
	}
	ok, err := s.backend.CanView(ctx, id, snowflake.ID(req.UserId), snowflake.ID(req.ChannelId))
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.CanViewResponse{Visible: ok}, nil
}

// RoleMembers implements GuildNode.RoleMembers.
func (s *guildServer) RoleMembers(ctx context.Context, req *transportpb.RoleMembersRequest) (*transportpb.RoleMembersResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if req.RoleId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: role members without a role", ErrInvalid))
	}
	ids, err := s.backend.RoleMembers(ctx, id, snowflake.ID(req.RoleId))
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	resp := &transportpb.RoleMembersResponse{UserIds: make([]uint64, len(ids))}
	for i, u := range ids {
		resp.UserIds[i] = uint64(u)
	}
	return resp, nil
}

// PresenceChanged implements GuildNode.PresenceChanged.
func (s *guildServer) PresenceChanged(ctx context.Context, req *transportpb.PresenceChangedRequest) (*transportpb.PresenceChangedResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if req.UserId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: presence without a user", ErrInvalid))
	}
	p := presence.Presence{Status: presence.Status(req.Status), Activities: activitiesFromPB(req.Activities)}
	if cs := req.ClientStatus; cs != nil {
		p.ClientStatus = presence.ClientStatus{Desktop: presence.Status(cs.Desktop), Mobile: presence.Status(cs.Mobile), Web: presence.Status(cs.Web)}
	}
	if err := s.backend.PresenceChanged(ctx, id, snowflake.ID(req.UserId), p); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.PresenceChangedResponse{}, nil
}

// LazyRequest implements GuildNode.LazyRequest.
func (s *guildServer) LazyRequest(ctx context.Context, req *transportpb.GatewayOpRequest) (*transportpb.GatewayOpResponse, error) {
	return s.gatewayOp(ctx, req, s.backend.LazyRequest)
}

// RequestMembers implements GuildNode.RequestMembers.
func (s *guildServer) RequestMembers(ctx context.Context, req *transportpb.GatewayOpRequest) (*transportpb.GatewayOpResponse, error) {
	return s.gatewayOp(ctx, req, s.backend.RequestMembers)
}

// gatewayOp checks a forwarded gateway op and hands it to do.
func (s *guildServer) gatewayOp(ctx context.Context, req *transportpb.GatewayOpRequest, do func(context.Context, snowflake.ID, event.Session, json.RawMessage) error) (*transportpb.GatewayOpResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	sess, ok := sessionFromPB(req.Session)
	if !ok {
		return nil, s.errs.toStatus(fmt.Errorf("%w: gateway op without a session", ErrInvalid))
	}
	if err := do(ctx, id, sess, req.D); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.GatewayOpResponse{}, nil
}

// UpdateVoiceState implements GuildNode.UpdateVoiceState.
func (s *guildServer) UpdateVoiceState(ctx context.Context, req *transportpb.UpdateVoiceStateRequest) (*transportpb.UpdateVoiceStateResponse, error) {
	id, err := s.check(req.GuildId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	sess, ok := sessionFromPB(req.Session)
	if !ok {
		return nil, s.errs.toStatus(fmt.Errorf("%w: voice state without a session", ErrInvalid))
	}
	v := guild.VoiceStateRequest{GuildID: id, ChannelID: snowflake.ID(req.ChannelId), SelfMute: req.SelfMute, SelfDeaf: req.SelfDeaf}
	if err := s.backend.UpdateVoiceState(ctx, sess, v); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.UpdateVoiceStateResponse{}, nil
}
