package transport

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// PresenceClient is a PresenceBackend that calls one presence node: the
// one ring.Owner(0) names. A cluster shards presence by user over several
// presence nodes with one client per node (runtime/app picks the
// user's owner). Disconnect and Report cannot fail to their callers: a
// presence node that is down rebuilds from the next re-reports, so their
// errors are only logged; DisconnectUser returns its error, for callers
// that tell the user's next owner.
type PresenceClient interface {
	PresenceBackend
	// DisconnectUser forgets session id of userID (SessionEnded with the
	// user: presence.Service.DisconnectUser on the node).
	DisconnectUser(ctx context.Context, id event.SessionID, userID snowflake.ID) error
	// Friends lists userID's friends as the presence node holds them
	// (PresenceNode.Friends; ErrNotOwner from a node that does not own
	// the user).
	Friends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error)
	// Close ends every connection.
	Close() error
}

type presenceClient struct {
	cfg  ClientConfig
	ring Placement
	pool *pool
	errs errorTable
	log  *slog.Logger
}

// NewPresenceClient returns a PresenceClient calling the owner of id 0 on
// ring.
func NewPresenceClient(cfg ClientConfig, ring Placement) PresenceClient {
	cfg.fill()
	return &presenceClient{cfg: cfg, ring: ring, pool: newPool(cfg.MaxMsgSize), errs: newErrorTable(cfg.Errors), log: cfg.Logger}
}

// invoke runs call on the presence node.
func (c *presenceClient) invoke(ctx context.Context, method string, call func(context.Context, transportpb.PresenceNodeClient) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	n, ok := c.ring.Owner(0)
	if !ok {
		clientCalls.WithLabelValues("Presence"+method, "error").Inc()
		return fmt.Errorf("transport: presence %s: no presence node: %w", method, ErrUnavailable)
	}
	conn, err := c.pool.get(n.Addr)
	if err == nil {
		err = c.errs.fromStatus(call(ctx, transportpb.NewPresenceNodeClient(conn)))
	}
	if err != nil {
		clientCalls.WithLabelValues("Presence"+method, "error").Inc()
		return fmt.Errorf("transport: presence %s on %s: %w", method, n.Name, err)
	}
	clientCalls.WithLabelValues("Presence"+method, "ok").Inc()
	return nil
}

// Connect implements PresenceBackend.
func (c *presenceClient) Connect(ctx context.Context, st presence.SessionState) error {
	req := sessionStateToPB(st)
	return c.invoke(ctx, "SessionStarted", func(ctx context.Context, p transportpb.PresenceNodeClient) error {
		_, err := p.SessionStarted(ctx, req)
		return err
	})
}

// Update implements PresenceBackend.
func (c *presenceClient) Update(ctx context.Context, id event.SessionID, u presence.Update) error {
	req := &transportpb.PresenceUpdateRequest{SessionId: string(id), Status: string(u.Status), Afk: u.AFK, Activities: activitiesToPB(u.Activities)}
	if !u.At.IsZero() {
		req.At = u.At.UnixNano()
	}
	return c.invoke(ctx, "Update", func(ctx context.Context, p transportpb.PresenceNodeClient) error {
		_, err := p.Update(ctx, req)
		return err
	})
}

// DisconnectUser implements PresenceClient.
func (c *presenceClient) DisconnectUser(ctx context.Context, id event.SessionID, userID snowflake.ID) error {
	return c.invoke(ctx, "SessionEnded", func(ctx context.Context, p transportpb.PresenceNodeClient) error {
		_, err := p.SessionEnded(ctx, &transportpb.PresenceSessionEnded{SessionId: string(id), UserId: uint64(userID)})
		return err
	})
}

// Disconnect implements PresenceBackend; errors are logged.
func (c *presenceClient) Disconnect(ctx context.Context, id event.SessionID) {
	err := c.invoke(ctx, "SessionEnded", func(ctx context.Context, p transportpb.PresenceNodeClient) error {
		_, err := p.SessionEnded(ctx, &transportpb.PresenceSessionEnded{SessionId: string(id)})
		return err
	})
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "presence session end not delivered", slog.String("session_id", string(id)), slog.String("err", err.Error()))
	}
}

// Report implements PresenceBackend; errors are logged.
func (c *presenceClient) Report(ctx context.Context, node string, sessions []presence.SessionState) {
	req := &transportpb.PresenceReport{Node: node, Sessions: make([]*transportpb.PresenceSession, len(sessions))}
	for i, st := range sessions {
		req.Sessions[i] = sessionStateToPB(st)
	}
	err := c.invoke(ctx, "Report", func(ctx context.Context, p transportpb.PresenceNodeClient) error {
		_, err := p.Report(ctx, req)
		return err
	})
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "presence report not delivered", slog.String("node", node), slog.String("err", err.Error()))
	}
}

// Friends implements PresenceClient.
func (c *presenceClient) Friends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error) {
	var ids []snowflake.ID
	err := c.invoke(ctx, "Friends", func(ctx context.Context, p transportpb.PresenceNodeClient) error {
		res, err := p.Friends(ctx, &transportpb.PresenceFriendsRequest{UserId: uint64(userID)})
		if err != nil {
			return err
		}
		ids = make([]snowflake.ID, len(res.UserIds))
		for i, id := range res.UserIds {
			ids[i] = snowflake.ID(id)
		}
		return nil
	})
	return ids, err
}

// Close implements PresenceClient.
func (c *presenceClient) Close() error {
	c.pool.close()
	return nil
}
