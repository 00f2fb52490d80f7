package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// PresenceBackend is what a presence node serves over PresenceNode;
// *presence.Service implements it, and so does NewPresenceClient.
type PresenceBackend interface {
	// Connect counts a session that identified (presence.Service.Connect).
	Connect(ctx context.Context, st presence.SessionState) error
	// Update applies a session's op 3 (presence.Service.Update).
	Update(ctx context.Context, id event.SessionID, u presence.Update) error
	// Disconnect forgets a session (presence.Service.Disconnect).
	Disconnect(ctx context.Context, id event.SessionID)
	// Report replaces what the presence role knows of a gateway node's
	// sessions (presence.Service.Report).
	Report(ctx context.Context, node string, sessions []presence.SessionState)
}

// UserDisconnecter is the optional ability of a PresenceBackend to be
// told the user of a session that ended (presence.Service.DisconnectUser
// on the user's owner; ErrNotOwner elsewhere). SessionEnded uses it when
// the request names the user.
type UserDisconnecter interface {
	DisconnectUser(ctx context.Context, id event.SessionID, userID snowflake.ID) error
}

// FriendsBackend is the optional ability of a PresenceBackend to answer
// who a user's friends are (presence.Relationships, on the user's owner;
// ErrNotOwner elsewhere). PresenceNode.Friends uses it; a backend without
// it answers Unimplemented.
type FriendsBackend interface {
	Friends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error)
}

var _ PresenceBackend = (*presence.Service)(nil)

// presenceServer serves PresenceNode on a presence node.
type presenceServer struct {
	transportpb.UnimplementedPresenceNodeServer
	backend PresenceBackend
	errs    errorTable
}

// SessionStarted implements PresenceNode.SessionStarted.
func (s *presenceServer) SessionStarted(ctx context.Context, req *transportpb.PresenceSession) (*transportpb.PresenceAck, error) {
	if req.SessionId == "" || req.UserId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: session without id or user", ErrInvalid))
	}
	if err := s.backend.Connect(ctx, sessionStateFromPB(req)); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.PresenceAck{}, nil
}

// Update implements PresenceNode.Update.
func (s *presenceServer) Update(ctx context.Context, req *transportpb.PresenceUpdateRequest) (*transportpb.PresenceAck, error) {
	if req.SessionId == "" {
		return nil, s.errs.toStatus(fmt.Errorf("%w: update without a session", ErrInvalid))
	}
	u := presence.Update{Status: presence.Status(req.Status), AFK: req.Afk, Activities: activitiesFromPB(req.Activities)}
	if req.At != 0 {
		u.At = time.Unix(0, req.At)
	}
	if err := s.backend.Update(ctx, event.SessionID(req.SessionId), u); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.PresenceAck{}, nil
}

// SessionEnded implements PresenceNode.SessionEnded.
func (s *presenceServer) SessionEnded(ctx context.Context, req *transportpb.PresenceSessionEnded) (*transportpb.PresenceAck, error) {
	if req.SessionId == "" {
		return nil, s.errs.toStatus(fmt.Errorf("%w: session end without a session", ErrInvalid))
	}
	if d, ok := s.backend.(UserDisconnecter); ok && req.UserId != 0 {
		if err := d.DisconnectUser(ctx, event.SessionID(req.SessionId), snowflake.ID(req.UserId)); err != nil {
			return nil, s.errs.toStatus(err)
		}
	} else {
		s.backend.Disconnect(ctx, event.SessionID(req.SessionId))
	}
	return &transportpb.PresenceAck{}, nil
}

// Report implements PresenceNode.Report.
func (s *presenceServer) Report(ctx context.Context, req *transportpb.PresenceReport) (*transportpb.PresenceAck, error) {
	if req.Node == "" {
		return nil, s.errs.toStatus(fmt.Errorf("%w: report without a node", ErrInvalid))
	}
	list := make([]presence.SessionState, len(req.Sessions))
	for i, st := range req.Sessions {
		list[i] = sessionStateFromPB(st)
	}
	s.backend.Report(ctx, req.Node, list)
	return &transportpb.PresenceAck{}, nil
}

// sessionStateToPB encodes st.
func sessionStateToPB(st presence.SessionState) *transportpb.PresenceSession {
	p := &transportpb.PresenceSession{
		SessionId: string(st.Session), UserId: uint64(st.UserID), Node: st.Node, Client: st.Client,
		Status: string(st.Status), Afk: st.AFK, Activities: activitiesToPB(st.Activities),
	}
	if !st.UpdatedAt.IsZero() {
		p.UpdatedAt = st.UpdatedAt.UnixNano()
	}
	return p
}

// sessionStateFromPB decodes p.
func sessionStateFromPB(p *transportpb.PresenceSession) presence.SessionState {
	st := presence.SessionState{
		Session: event.SessionID(p.SessionId), UserID: snowflake.ID(p.UserId), Node: p.Node, Client: p.Client,
		Status: presence.Status(p.Status), AFK: p.Afk, Activities: activitiesFromPB(p.Activities),
	}
	if p.UpdatedAt != 0 {
		st.UpdatedAt = time.Unix(0, p.UpdatedAt)
	}
	return st
}

// activitiesToPB encodes as.
func activitiesToPB(as []presence.Activity) []*transportpb.PresenceActivity {
	out := make([]*transportpb.PresenceActivity, len(as))
	for i, a := range as {
		out[i] = &transportpb.PresenceActivity{Name: a.Name, Type: int32(a.Type), Url: a.URL, State: a.State, Details: a.Details, CreatedAt: a.CreatedAt}
	}
	return out
}

// activitiesFromPB decodes ps; the result is never nil.
func activitiesFromPB(ps []*transportpb.PresenceActivity) []presence.Activity {
	out := make([]presence.Activity, len(ps))
	for i, a := range ps {
		out[i] = presence.Activity{Name: a.Name, Type: int(a.Type), URL: a.Url, State: a.State, Details: a.Details, CreatedAt: a.CreatedAt}
	}
	return out
}

// Friends implements PresenceNode.Friends.
func (s *presenceServer) Friends(ctx context.Context, req *transportpb.PresenceFriendsRequest) (*transportpb.PresenceFriends, error) {
	if req.UserId == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: friends of no user", ErrInvalid))
	}
	f, ok := s.backend.(FriendsBackend)
	if !ok {
		return s.UnimplementedPresenceNodeServer.Friends(ctx, req)
	}
	ids, err := f.Friends(ctx, snowflake.ID(req.UserId))
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	out := &transportpb.PresenceFriends{UserIds: make([]uint64, len(ids))}
	for i, id := range ids {
		out.UserIds[i] = uint64(id)
	}
	return out, nil
}
