// Gateway is a gateway node's presence side: its
// gateway.SessionReporter and its op 3, 8 and 14 handlers, built once for
// both commands; only the seams differ — the presence service the
// sessions' states go to (in process in `concord dev`, the user's owner on
// the presence ring over PresenceNode in `concord serve`) and the guild
// op 8 and op 14 go to (the process's guild service, or the guild's owner
// over GuildNode).

package presencerole

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// Guilds is where op 8 (request guild members) and op 14 (member list
// ranges) go: the guild the request names. Each call gets the decoded
// request and the payload as received, so a remote guild's client sends
// the payload on unchanged.
type Guilds interface {
	LazyRequest(ctx context.Context, s event.Session, req memberlist.Request, raw json.RawMessage) error
	RequestMembers(ctx context.Context, s event.Session, req memberlist.MembersRequest, raw json.RawMessage) error
}

// Gateway is a gateway node's presence side. Sessions keeps each local
// session's state (client kind, last status and activities) so the node
// re-reports it, which is how a restarted presence service rebuilds; it
// orders every state change with its call, so a re-report never carries
// a state older than one the presence service applied.
type Gateway struct {
	// Sessions holds the node's sessions' states; its upstream is the
	// presence service.
	Sessions *presence.LocalSessions
	// Guilds takes op 8 and op 14.
	Guilds Guilds
	// Ended, when set, runs after a session ended (`concord dev`: the
	// guild service forgets the session's presence).
	Ended func(event.SessionID)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives diagnostics.
	Logger *slog.Logger
}

var _ gateway.SessionReporter = (*Gateway)(nil)

func (g *Gateway) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// SessionStarted implements gateway.SessionReporter: the session counts
// with IDENTIFY's presence (an invalid one is ignored: online).
func (g *Gateway) SessionStarted(ctx context.Context, s event.Session, c gateway.ClientInfo) {
	st := presence.SessionState{
		Session: s.ID, UserID: s.UserID, Node: s.Node,
		Client: presence.ClientKind(c.OS, c.Browser), Status: presence.Online,
		Activities: []presence.Activity{}, UpdatedAt: g.now(),
	}
	if c.Presence != nil {
		if u, err := presence.ParseUpdate(c.Presence); err == nil {
			st.Status, st.AFK, st.Activities = u.Status, u.AFK, u.Activities
		} else {
			g.Logger.Debug("identify presence ignored", "session_id", s.ID, "err", err)
		}
	}
	if err := g.Sessions.Start(ctx, st); err != nil {
		// The next re-report carries the session.
		g.Logger.Warn("presence connect", "session_id", s.ID, "err", err)
	}
}

// SessionEnded implements gateway.SessionReporter.
func (g *Gateway) SessionEnded(ctx context.Context, s event.Session) {
	g.Sessions.End(ctx, s.ID)
	if g.Ended != nil {
		g.Ended(s.ID)
	}
}

// Report implements gateway.SessionReporter: the states of the node's
// sessions go to the presence service; states of sessions the node no
// longer holds are forgotten.
func (g *Gateway) Report(ctx context.Context, node string, sessions []event.Session) {
	g.Sessions.Report(ctx, node, sessions)
}

// OpHandlers returns the gateway's op 3, 8 and 14 handlers.
func (g *Gateway) OpHandlers() map[int]gateway.OpHandler {
	return map[int]gateway.OpHandler{
		gateway.OpPresenceUpdate:      gateway.OpHandlerFunc(g.presenceUpdate),
		gateway.OpRequestGuildMembers: gateway.OpHandlerFunc(g.requestMembers),
		gateway.OpLazyRequest:         gateway.OpHandlerFunc(g.lazyRequest),
	}
}

// presenceUpdate handles op 3: invalid updates close with 4002, floods
// with 4008. An update the presence service cannot take (a presence
// node that is down) is kept as the session's state and reaches it with
// the next re-report.
func (g *Gateway) presenceUpdate(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	u, err := presence.ParseUpdate(d)
	if err == nil {
		err = g.Sessions.Apply(ctx, s.ID, u)
	}
	if c := presence.CloseCode(err); c != 0 {
		return &gateway.CloseError{Code: c, Reason: "presence"}
	}
	if err != nil {
		g.Logger.Warn("presence update", "session_id", s.ID, "err", err)
	}
	return nil
}

// lazyRequest handles op 14. A payload that does not decode closes with
// 4002; refused channels or clamped ranges are only logged.
func (g *Gateway) lazyRequest(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	req, err := memberlist.ParseRequest(d)
	if err != nil {
		return &gateway.CloseError{Code: gateway.CloseDecodeError, Reason: "bad op 14"}
	}
	g.served(s, req.GuildID, "op 14", g.Guilds.LazyRequest(ctx, s, req, d))
	return nil
}

// requestMembers handles op 8. A payload that does not decode closes with
// 4002; a request missing its intent is logged and ignored.
func (g *Gateway) requestMembers(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	req, err := memberlist.ParseMembersRequest(d)
	if err != nil {
		return &gateway.CloseError{Code: gateway.CloseDecodeError, Reason: "bad op 8"}
	}
	g.served(s, req.GuildID, "op 8", g.Guilds.RequestMembers(ctx, s, req, d))
	return nil
}

// served logs an op the guild refused or could not be reached for.
func (g *Gateway) served(s event.Session, guildID snowflake.ID, op string, err error) {
	if err != nil {
		g.Logger.Info("gateway op not served by the guild", "op", op, "guild_id", guildID, "session_id", s.ID, "err", err)
	}
}

// LocalGuilds is Guilds on the process's own guild service (`concord
// dev`).
type LocalGuilds struct{ Service *guild.Service }

// LazyRequest implements Guilds.
func (l LocalGuilds) LazyRequest(ctx context.Context, s event.Session, req memberlist.Request, _ json.RawMessage) error {
	return l.Service.LazyRequest(ctx, s, req)
}

// RequestMembers implements Guilds.
func (l LocalGuilds) RequestMembers(ctx context.Context, s event.Session, req memberlist.MembersRequest, _ json.RawMessage) error {
	return l.Service.RequestMembers(ctx, s, req)
}

// RemoteGuilds is the calls of a guild client that sends the payload to
// the guild's owner (transport.GuildClient).
type RemoteGuilds interface {
	LazyRequest(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error
	RequestMembers(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error
}

// OwnerGuilds is Guilds through a guild client (`concord serve`): each
// request goes to its guild's owner.
type OwnerGuilds struct{ Client RemoteGuilds }

// LazyRequest implements Guilds.
func (o OwnerGuilds) LazyRequest(ctx context.Context, s event.Session, req memberlist.Request, raw json.RawMessage) error {
	return o.Client.LazyRequest(ctx, req.GuildID, s, raw)
}

// RequestMembers implements Guilds.
func (o OwnerGuilds) RequestMembers(ctx context.Context, s event.Session, req memberlist.MembersRequest, raw json.RawMessage) error {
	return o.Client.RequestMembers(ctx, req.GuildID, s, raw)
}
