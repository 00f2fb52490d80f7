package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// ReadStateClient is a ReadStateBackend that calls the read-state node
// owning each user on a ring of read-state nodes (a LocalRing over the
// readstate role). Like GuildClient, a call whose node is unavailable is
// retried once on the ring's owner at that moment if that is another
// node. readstate.ErrForbidden, ErrClosed and ErrStore cross the wire.
type ReadStateClient interface {
	ReadStateBackend
	// Close ends every connection.
	Close() error
}

type readStateClient struct {
	cfg  ClientConfig
	ring Placement
	pool *pool
	errs errorTable
	log  *slog.Logger
}

// NewReadStateClient returns a ReadStateClient routing by user id on ring.
func NewReadStateClient(cfg ClientConfig, ring Placement) ReadStateClient {
	cfg.fill()
	return &readStateClient{cfg: cfg, ring: ring, pool: newPool(cfg.MaxMsgSize), errs: newErrorTable(cfg.Errors), log: cfg.Logger}
}

// invoke runs call on the owner of user, retrying once on a new owner.
func (c *readStateClient) invoke(ctx context.Context, method string, user snowflake.ID, call func(context.Context, transportpb.ReadStateNodeClient) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	n, ok := c.ring.Owner(user)
	if !ok {
		clientCalls.WithLabelValues("ReadState"+method, "error").Inc()
		return fmt.Errorf("transport: read-state %s user %d: no read-state node: %w", method, user, ErrUnavailable)
	}
	err := c.once(ctx, n, call)
	if err != nil && retryable(err) && ctx.Err() == nil {
		if next, ok := c.ring.Owner(user); ok && (next.Name != n.Name || next.Addr != n.Addr) {
			c.log.LogAttrs(ctx, slog.LevelInfo, "read-state call retried on new owner", slog.String("method", method),
				slog.String("from", n.Name), slog.String("to", next.Name), slog.String("err", err.Error()))
			n = next
			err = c.once(ctx, n, call)
		}
	}
	if err != nil {
		clientCalls.WithLabelValues("ReadState"+method, "error").Inc()
		return fmt.Errorf("transport: read-state %s user %d on %s: %w", method, user, n.Name, err)
	}
	clientCalls.WithLabelValues("ReadState"+method, "ok").Inc()
	return nil
}

func (c *readStateClient) once(ctx context.Context, n registry.Node, call func(context.Context, transportpb.ReadStateNodeClient) error) error {
	conn, err := c.pool.get(n.Addr)
	if err != nil {
		return err
	}
	return c.errs.fromStatus(call(ctx, transportpb.NewReadStateNodeClient(conn)))
}

// Ack implements ReadStateBackend.
func (c *readStateClient) Ack(ctx context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error) {
	req := &transportpb.AckRequest{UserId: uint64(user), ChannelId: uint64(channel), MessageId: uint64(message)}
	var out readstate.MessageAck
	err := c.invoke(ctx, "Ack", user, func(ctx context.Context, r transportpb.ReadStateNodeClient) error {
		resp, err := r.Ack(ctx, req)
		if err == nil {
			out = readstate.MessageAck{ChannelID: snowflake.ID(resp.ChannelId), MessageID: snowflake.ID(resp.MessageId),
				MentionCount: int(resp.MentionCount), Version: resp.Version}
		}
		return err
	})
	return out, err
}

// States implements ReadStateBackend.
func (c *readStateClient) States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error) {
	req := &transportpb.StatesRequest{UserId: uint64(user), ChannelIds: idsToPB(channels), All: channels == nil}
	var out []readstate.State
	err := c.invoke(ctx, "States", user, func(ctx context.Context, r transportpb.ReadStateNodeClient) error {
		resp, err := r.States(ctx, req)
		if err != nil {
			return err
		}
		out = make([]readstate.State, len(resp.States))
		for i, st := range resp.States {
			out[i] = readstate.State{ChannelID: snowflake.ID(st.ChannelId), LastReadID: snowflake.ID(st.LastReadId),
				MentionCount: int(st.MentionCount), Flags: st.Flags}
		}
		return nil
	})
	return out, err
}

// AddMentions implements ReadStateBackend: the mentions are grouped by
// their users' owners on the ring and sent to each owner in one call. An
// error leaves some mentions possibly counted: the call is idempotent, so
// the caller retries all of them.
func (c *readStateClient) AddMentions(ctx context.Context, ms []readstate.Mention) error {
	byOwner := make(map[string][]*transportpb.Mention)
	first := make(map[string]snowflake.ID)
	for _, m := range ms {
		n, ok := c.ring.Owner(m.User)
		if !ok {
			clientCalls.WithLabelValues("ReadStateAddMentions", "error").Inc()
			return fmt.Errorf("transport: read-state AddMentions user %d: no read-state node: %w", m.User, ErrUnavailable)
		}
		if _, seen := first[n.Name]; !seen {
			first[n.Name] = m.User
		}
		byOwner[n.Name] = append(byOwner[n.Name], &transportpb.Mention{UserId: uint64(m.User), ChannelId: uint64(m.Channel),
			MessageId: uint64(m.Message), Offset: m.Offset, Removed: m.Removed})
	}
	var errs []error
	for name, list := range byOwner {
		req := &transportpb.MentionsRequest{Mentions: list}
		errs = append(errs, c.invoke(ctx, "AddMentions", first[name], func(ctx context.Context, r transportpb.ReadStateNodeClient) error {
			_, err := r.AddMentions(ctx, req)
			return err
		}))
	}
	return errors.Join(errs...)
}

// Close implements ReadStateClient.
func (c *readStateClient) Close() error {
	c.pool.close()
	return nil
}
