package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/presencerole"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/transport"
)

// RolePresence is the presence role (runtime/presence): every live
// session of every user, as gateway nodes report them, folded into one
// status per user and broadcast to friends and guilds. A cluster runs two
// or more presence nodes, each owning the users a ring gives it
// (presencerole_ring.go).
const RolePresence = "presence"

// presenceRole is the presence role of a node: a presence.Service fed
// over PresenceNode, whose router sends PRESENCE_UPDATE to friends'
// sessions (on their gateway nodes) and each changed presence to the guild
// nodes owning the user's guilds.
type presenceRole struct {
	svc     *presence.Service
	tick    time.Duration
	log     *slog.Logger
	pending sync.WaitGroup
}

// openPresenceRole builds the service. A fresh presence node (first start
// or restart after a crash) absorbs what gateways re-report for two report
// intervals without broadcasting it: the guild nodes kept the statuses it
// froze.
func openPresenceRole(cfg Config, n *Node, st store.Guilds, guilds transport.GuildClient, ring *registry.LocalRing, sink event.Sink, dir userSessions) (*presenceRole, error) {
	log := n.log.With("component", "presence")
	r := &presenceRole{log: log, tick: cfg.Presence.Window / 4}
	if r.tick <= 0 || r.tick > time.Second {
		r.tick = time.Second
	}
	router := &presenceRouter{store: st, guilds: guilds, ring: ring, sink: sink, sessions: dir, log: log, wg: &r.pending, timeout: cfg.CallTimeout}
	svc, err := presence.New(presence.Config{
		Window: cfg.Presence.Window, NodeTTL: 3 * cfg.Presence.ReportInterval, Warmup: 2 * cfg.Presence.ReportInterval,
		Registerer: n.metrics, Logger: log,
	}, router, presence.NewFriends(nil))
	if err != nil {
		return nil, fmt.Errorf("cluster: presence: %w", err)
	}
	r.svc = svc
	return r, nil
}

// run broadcasts due changes until ctx ends, then waits for the
// broadcasts in flight.
func (r *presenceRole) run(ctx context.Context) {
	r.svc.Run(ctx, r.tick)
	r.pending.Wait()
}

// userSessions finds users' sessions on every gateway node (the session
// directory, transport.SessionDirectory): friends of a user may be owned
// by another presence node, so their sessions are looked up, not kept.
type userSessions interface {
	UserSessions(ctx context.Context, users []snowflake.ID) ([]event.Session, error)
}

// presenceRouter is the presence role's presence.Router in a cluster.
// Each broadcast runs in its own goroutine, so a slow guild node does not
// hold up the service's ticker.
type presenceRouter struct {
	store    store.Guilds
	guilds   transport.GuildClient
	ring     *registry.LocalRing
	sink     event.Sink
	sessions userSessions
	log      *slog.Logger
	wg       *sync.WaitGroup
	timeout  time.Duration
}

// Broadcast implements presence.Router.
func (r *presenceRouter) Broadcast(_ context.Context, userID snowflake.ID, p presence.Presence, friends []snowflake.ID) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		r.broadcast(ctx, userID, p, friends)
	}()
}

// broadcast delivers PRESENCE_UPDATE (without guild_id) to the friends'
// sessions and calls GuildNode.PresenceChanged once per guild node owning one
// of the user's guilds.
func (r *presenceRouter) broadcast(ctx context.Context, userID snowflake.ID, p presence.Presence, friends []snowflake.ID) {
	if len(friends) > 0 {
		payload := p.Event(userID, 0)
		found, err := r.sessions.UserSessions(ctx, friends)
		if err != nil {
			r.log.Warn("presence: friends' sessions", "user_id", userID, "err", err)
		}
		byNode := make(map[string][]event.Target)
		for _, s := range found {
			byNode[s.Node] = append(byNode[s.Node], event.Target{Session: s.ID})
		}
		for node, targets := range byNode {
			r.sink.Deliver(ctx, node, event.Batch{Type: "PRESENCE_UPDATE", Payloads: []json.RawMessage{payload}, Targets: targets})
		}
	}
	guilds, err := r.store.UserGuilds(ctx, userID)
	if err != nil {
		r.log.Warn("presence: user guilds", "user_id", userID, "err", err)
		return
	}
	// One call per owner: the owner applies the change to every guild of
	// the user it has loaded.
	byOwner := make(map[string]snowflake.ID)
	for _, g := range guilds {
		if n, ok := r.ring.Owner(g); ok {
			if _, seen := byOwner[n.Name]; !seen {
				byOwner[n.Name] = g
			}
		}
	}
	for owner, g := range byOwner {
		if err := r.guilds.PresenceChanged(ctx, g, userID, p); err != nil {
			r.log.Warn("presence change not delivered to guild node", "user_id", userID, "node", owner, "err", err)
		}
	}
}

// newGatewayPresence is a gateway node's presence side in a cluster
// (presencerole.Gateway, as in `concord dev`): sessions and op 3 go to
// the user's presence node (shardedPresence), op 8 and op 14 to the
// guild's owner (GuildNode.LazyRequest and RequestMembers).
func newGatewayPresence(client presence.Upstream, guilds transport.GuildClient, log *slog.Logger) *presencerole.Gateway {
	// An update the user's presence node cannot take (it is down, or the
	// ring is moving the user) still stands: it reaches the owner with
	// the next re-report.
	sessions := presence.NewLocalSessions(presence.LocalSessionsConfig{
		Upstream: client,
		Deferred: func(err error) bool {
			return errors.Is(err, transport.ErrUnavailable) || errors.Is(err, transport.ErrNotOwner)
		},
	})
	return &presencerole.Gateway{Sessions: sessions, Guilds: presencerole.OwnerGuilds{Client: guilds}, Logger: log}
}
