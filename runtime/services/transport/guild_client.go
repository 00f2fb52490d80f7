package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// GuildClient is a GuildBackend that calls the guild node owning each
// guild on the placement ring.
//
// A call whose node is unavailable (connection refused or lost, node
// stopping) or that no longer owns the guild is retried once, on the
// ring's owner at that moment, if that is a different node; otherwise the
// error is returned at once (it matches ErrUnavailable or ErrNotOwner),
// so callers fail fast while the registry has not dropped a dead node.
type GuildClient interface {
	GuildBackend
	// Close ends every connection.
	Close() error
}

type guildClient struct {
	cfg  ClientConfig
	ring Placement
	pool *pool
	errs errorTable
	log  *slog.Logger
}

// NewGuildClient returns a GuildClient routing by ring (a LocalRing over
// the guild role).
func NewGuildClient(cfg ClientConfig, ring Placement) GuildClient {
	cfg.fill()
	return &guildClient{
		cfg:  cfg,
		ring: ring,
		pool: newPool(cfg.MaxMsgSize),
		errs: newErrorTable(cfg.Errors),
		log:  cfg.Logger,
	}
}

// invoke runs call on the owner of guildID, retrying once on a new owner.
func (c *guildClient) invoke(ctx context.Context, method string, guildID snowflake.ID, call func(context.Context, transportpb.GuildNodeClient) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	n, ok := c.ring.Owner(guildID)
	if !ok {
		clientCalls.WithLabelValues(method, "error").Inc()
		return fmt.Errorf("transport: %s guild %d: %w", method, guildID, ErrNoOwner)
	}
	err := c.once(ctx, n, call)
	if err == nil {
		clientCalls.WithLabelValues(method, "ok").Inc()
		return nil
	}
	if retryable(err) && ctx.Err() == nil {
		if next, ok := c.ring.Owner(guildID); ok && (next.Name != n.Name || next.Addr != n.Addr) {
			c.log.LogAttrs(ctx, slog.LevelInfo, "guild call retried on new owner", slog.String("method", method),
				slog.Uint64("guild_id", uint64(guildID)), slog.String("from", n.Name), slog.String("to", next.Name),
				slog.String("err", err.Error()))
			n = next
			if err = c.once(ctx, n, call); err == nil {
				clientCalls.WithLabelValues(method, "retried").Inc()
				return nil
			}
		}
	}
	clientCalls.WithLabelValues(method, "error").Inc()
	return fmt.Errorf("transport: %s guild %d on %s: %w", method, guildID, n.Name, err)
}

func (c *guildClient) once(ctx context.Context, n registry.Node, call func(context.Context, transportpb.GuildNodeClient) error) error {
	conn, err := c.pool.get(n.Addr)
	if err != nil {
		return err
	}
	return c.errs.fromStatus(call(ctx, transportpb.NewGuildNodeClient(conn)))
}

// Subscribe implements GuildBackend.
func (c *guildClient) Subscribe(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	return c.subscribe(ctx, guildID, s, false, false)
}

// SubscribeMoved implements GuildBackend: Subscribe with moved set.
func (c *guildClient) SubscribeMoved(ctx context.Context, guildID snowflake.ID, s event.Session, refresh bool) error {
	return c.subscribe(ctx, guildID, s, true, refresh)
}

func (c *guildClient) subscribe(ctx context.Context, guildID snowflake.ID, s event.Session, moved, refresh bool) error {
	req := &transportpb.SubscribeRequest{GuildId: uint64(guildID), Session: sessionToPB(s), Moved: moved, Refresh: refresh}
	return c.invoke(ctx, "Subscribe", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		_, err := g.Subscribe(ctx, req)
		return err
	})
}

// Disconnect implements GuildBackend.
func (c *guildClient) Disconnect(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	req := &transportpb.DisconnectRequest{GuildId: uint64(guildID), Session: sessionToPB(s)}
	return c.invoke(ctx, "Disconnect", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		_, err := g.Disconnect(ctx, req)
		return err
	})
}

// MoveSession implements GuildBackend.
func (c *guildClient) MoveSession(ctx context.Context, guildID snowflake.ID, mv guild.Move) (int, error) {
	req := &transportpb.MoveSessionRequest{GuildId: uint64(guildID), SessionId: string(mv.Session), To: mv.To, MoveId: mv.ID}
	var resp *transportpb.MoveSessionResponse
	err := c.invoke(ctx, "MoveSession", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) (err error) {
		resp, err = g.MoveSession(ctx, req)
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(resp.Markers), nil
}

// CanView implements GuildBackend.
func (c *guildClient) CanView(ctx context.Context, guildID, user, channel snowflake.ID) (bool, error) {
	req := &transportpb.CanViewRequest{GuildId: uint64(guildID), UserId: uint64(user), ChannelId: uint64(channel)}
	var resp *transportpb.CanViewResponse
	err := c.invoke(ctx, "CanView", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) (err error) {
		resp, err = g.CanView(ctx, req)
		return err
	})
	if err != nil {
		return false, err
	}
	return resp.Visible, nil
}

// RoleMembers implements GuildBackend.
func (c *guildClient) RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error) {
	req := &transportpb.RoleMembersRequest{GuildId: uint64(guildID), RoleId: uint64(role)}
	var resp *transportpb.RoleMembersResponse
	err := c.invoke(ctx, "RoleMembers", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) (err error) {
		resp, err = g.RoleMembers(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	ids := make([]snowflake.ID, len(resp.UserIds))
	for i, id := range resp.UserIds {
		ids[i] = snowflake.ID(id)
	}
	return ids, nil
}

// PresenceChanged implements GuildBackend.
func (c *guildClient) PresenceChanged(ctx context.Context, guildID, user snowflake.ID, p presence.Presence) error {
	req := &transportpb.PresenceChangedRequest{
		GuildId: uint64(guildID), UserId: uint64(user), Status: string(p.Status), Activities: activitiesToPB(p.Activities),
		ClientStatus: &transportpb.ClientStatus{
			Desktop: string(p.ClientStatus.Desktop), Mobile: string(p.ClientStatus.Mobile), Web: string(p.ClientStatus.Web),
		},
	}
	return c.invoke(ctx, "PresenceChanged", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		_, err := g.PresenceChanged(ctx, req)
		return err
	})
}

// LazyRequest implements GuildBackend.
func (c *guildClient) LazyRequest(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	req := &transportpb.GatewayOpRequest{GuildId: uint64(guildID), Session: sessionToPB(s), D: d}
	return c.invoke(ctx, "LazyRequest", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		_, err := g.LazyRequest(ctx, req)
		return err
	})
}

// RequestMembers implements GuildBackend.
func (c *guildClient) RequestMembers(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	req := &transportpb.GatewayOpRequest{GuildId: uint64(guildID), Session: sessionToPB(s), D: d}
	return c.invoke(ctx, "RequestMembers", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		_, err := g.RequestMembers(ctx, req)
		return err
	})
}

// UpdateVoiceState implements GuildBackend.
func (c *guildClient) UpdateVoiceState(ctx context.Context, s event.Session, v guild.VoiceStateRequest) error {
	req := &transportpb.UpdateVoiceStateRequest{
		GuildId: uint64(v.GuildID), Session: sessionToPB(s), ChannelId: uint64(v.ChannelID), SelfMute: v.SelfMute, SelfDeaf: v.SelfDeaf,
	}
	return c.invoke(ctx, "UpdateVoiceState", v.GuildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		_, err := g.UpdateVoiceState(ctx, req)
		return err
	})
}

// Close implements GuildClient.
func (c *guildClient) Close() error {
	c.pool.close()
	return nil
}
