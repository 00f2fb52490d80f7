package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// SessionBackend is a gateway node's part of the session directory, the
// directory of events aimed at one user rather than a guild: the sessions
// the node holds, by user, and subscribing one of them to a guild its
// user joined mid-session. Served on GatewayNode (Services.Sessions).
type SessionBackend interface {
	// UserSessions returns the node's sessions of users (UserID, Bot,
	// Intents, shard and Node set).
	UserSessions(ctx context.Context, users []snowflake.ID) []event.Session
	// SubscribeGuild subscribes session id to guildID on the guild's
	// owner; found is false when the node holds no such session.
	SubscribeGuild(ctx context.Context, id event.SessionID, guildID snowflake.ID) (found bool, err error)
}

// Roster lists the live nodes of a role and finds one by name (a
// LocalRing's View().Nodes() and Node).
type Roster interface {
	Directory
	Nodes() []registry.Node
}

// SessionDirectory finds a user's sessions on every gateway node of the
// cluster and subscribes them to guilds. The directory is derived from the
// registry rather than kept: a lookup asks every live gateway node (in
// parallel) for the sessions it holds, so it is exact whichever node a
// session identified, resumed or was handed to, and nothing is left to
// reconcile when a gateway node dies. Its cost is one small call per
// gateway node per lookup; events aimed at one user (DMs, acks, joins)
// are rare next to guild events, which never use it.
type SessionDirectory interface {
	// UserSessions returns the sessions of users on every gateway node.
	// A node that does not answer is skipped: the sessions found are
	// returned with an error naming it.
	UserSessions(ctx context.Context, users []snowflake.ID) ([]event.Session, error)
	// SubscribeGuild asks s's gateway node (s.Node) to subscribe s to
	// guildID; found is false when that node no longer holds s.
	SubscribeGuild(ctx context.Context, s event.Session, guildID snowflake.ID) (found bool, err error)
	// Close ends every connection.
	Close() error
}

type sessionDirectory struct {
	cfg    ClientConfig
	roster Roster
	pool   *pool
	errs   errorTable
	log    *slog.Logger
}

// NewSessionDirectory returns a SessionDirectory over the gateway nodes
// roster lists (a LocalRing over the gateway role).
func NewSessionDirectory(cfg ClientConfig, roster Roster) SessionDirectory {
	cfg.fill()
	return &sessionDirectory{cfg: cfg, roster: roster, pool: newPool(cfg.MaxMsgSize), errs: newErrorTable(cfg.Errors), log: cfg.Logger}
}

func (d *sessionDirectory) client(ctx context.Context, n registry.Node) (transportpb.GatewayNodeClient, error) {
	conn, err := d.pool.get(n.Addr)
	if err != nil {
		return nil, err
	}
	return transportpb.NewGatewayNodeClient(conn), nil
}

func (d *sessionDirectory) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.cfg.CallTimeout)
}

// UserSessions implements SessionDirectory.
func (d *sessionDirectory) UserSessions(ctx context.Context, users []snowflake.ID) ([]event.Session, error) {
	if len(users) == 0 {
		return nil, nil
	}
	ctx, cancel := d.bound(ctx)
	defer cancel()
	req := &transportpb.UserSessionsRequest{UserIds: make([]uint64, len(users))}
	for i, u := range users {
		req.UserIds[i] = uint64(u)
	}
	nodes := d.roster.Nodes()
	var (
		mu   sync.Mutex
		out  []event.Session
		errs []error
		wg   sync.WaitGroup
	)
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res *transportpb.UserSessionsResponse
			c, err := d.client(ctx, n)
			if err == nil {
				res, err = c.UserSessions(ctx, req)
				err = d.errs.fromStatus(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				clientCalls.WithLabelValues("UserSessions", "error").Inc()
				errs = append(errs, fmt.Errorf("transport: user sessions on %s: %w", n.Name, err))
				return
			}
			clientCalls.WithLabelValues("UserSessions", "ok").Inc()
			for _, p := range res.GetSessions() {
				if s, ok := sessionFromPB(p); ok {
					// The answering node is where the session is, whatever
					// the entry says.
					s.Node = n.Name
					out = append(out, s)
				}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// SubscribeGuild implements SessionDirectory.
func (d *sessionDirectory) SubscribeGuild(ctx context.Context, s event.Session, guildID snowflake.ID) (bool, error) {
	n, ok := d.roster.Node(s.Node)
	if !ok {
		clientCalls.WithLabelValues("SubscribeGuild", "error").Inc()
		return false, fmt.Errorf("transport: subscribe guild %d: gateway node %q: %w", guildID, s.Node, ErrUnavailable)
	}
	ctx, cancel := d.bound(ctx)
	defer cancel()
	c, err := d.client(ctx, n)
	var res *transportpb.SubscribeGuildResponse
	if err == nil {
		res, err = c.SubscribeGuild(ctx, &transportpb.SubscribeGuildRequest{SessionId: string(s.ID), GuildId: uint64(guildID)})
		err = d.errs.fromStatus(err)
	}
	if err != nil {
		clientCalls.WithLabelValues("SubscribeGuild", "error").Inc()
		return false, fmt.Errorf("transport: subscribe guild %d on %s: %w", guildID, n.Name, err)
	}
	clientCalls.WithLabelValues("SubscribeGuild", "ok").Inc()
	return res.GetFound(), nil
}

// Close implements SessionDirectory.
func (d *sessionDirectory) Close() error {
	d.pool.close()
	return nil
}
