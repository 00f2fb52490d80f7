package transport

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport/transportpb"
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
	req := &transportpb.SubscribeRequest{GuildId: uint64(guildID), Session: sessionToPB(s)}
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

// Call implements GuildBackend.
func (c *guildClient) Call(ctx context.Context, guildID snowflake.ID, method string, body []byte) (int, []byte, error) {
	req := &transportpb.CallRequest{GuildId: uint64(guildID), Method: method, Body: body}
	var resp *transportpb.CallResponse
	err := c.invoke(ctx, "Call", guildID, func(ctx context.Context, g transportpb.GuildNodeClient) error {
		var err error
		resp, err = g.Call(ctx, req)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return int(resp.Status), resp.Body, nil
}

// Close implements GuildClient.
func (c *guildClient) Close() error {
	c.pool.close()
	return nil
}
