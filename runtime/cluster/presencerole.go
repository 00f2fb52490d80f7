package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/memberlist"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/shed"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/transport"
	"github.com/concord-chat/concord/runtime/typing"
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

// presenceCache is a guild node's guild.PresenceSource: the presences the
// presence node broadcast to it. A guild node that starts (or takes a
// guild over) sees members offline until their next change; the presence
// node does not re-announce unchanged statuses.
type presenceCache struct {
	mu sync.Mutex
	m  map[snowflake.ID]presence.Presence
}

func newPresenceCache() *presenceCache {
	return &presenceCache{m: make(map[snowflake.ID]presence.Presence)}
}

// Get implements guild.PresenceSource.
func (c *presenceCache) Get(userID snowflake.ID) presence.Presence {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[userID]; ok {
		return p
	}
	return presence.OfflinePresence()
}

func (c *presenceCache) set(userID snowflake.ID, p presence.Presence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Status == presence.Offline {
		delete(c.m, userID)
		return
	}
	c.m[userID] = p
}

// enableGuildPresence turns on presence, member lists and focused typing
// in a guild node's service, as the single-process platform does, with
// the presences the presence node broadcasts as their source.
func enableGuildPresence(svc *guild.Service, reg prometheus.Registerer) (*presenceCache, error) {
	tracker, err := typing.New(typing.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("cluster: typing: %w", err)
	}
	shedder, err := shed.New(shed.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("cluster: shed: %w", err)
	}
	cache := newPresenceCache()
	svc.EnablePresence(guild.PresenceConfig{Source: cache, Tracker: tracker, Shedder: shedder})
	return cache, nil
}

// gatewayPresence is a gateway node's gateway.SessionReporter in a
// cluster, and its op 3, 8 and 14 handlers. Sessions and op 3 go to the
// user's presence node (shardedPresence); it keeps each local session's
// state (client kind, last status and activities) so the node re-reports
// it, which is how a restarted presence node rebuilds. Op 8 and op 14 go
// to the guild's owner (GuildNode.LazyRequest and RequestMembers). Like the single-process
// wiring (platform/presence.go), it keeps the states in a
// presence.LocalSessions, which orders every state change with its call,
// so a re-report never carries a state older than one the presence node
// applied; calls are bounded by the client's call timeout.
type gatewayPresence struct {
	node     string
	guilds   transport.GuildClient
	log      *slog.Logger
	sessions *presence.LocalSessions
}

var _ gateway.SessionReporter = (*gatewayPresence)(nil)

func newGatewayPresence(node string, client presence.Upstream, guilds transport.GuildClient, log *slog.Logger) *gatewayPresence {
	// An update the user's presence node cannot take (it is down, or the
	// ring is moving the user) still stands: it reaches the owner with
	// the next re-report.
	sessions := presence.NewLocalSessions(presence.LocalSessionsConfig{
		Upstream: client,
		Deferred: func(err error) bool {
			return errors.Is(err, transport.ErrUnavailable) || errors.Is(err, transport.ErrNotOwner)
		},
	})
	return &gatewayPresence{node: node, guilds: guilds, log: log, sessions: sessions}
}

// SessionStarted implements gateway.SessionReporter: the session counts
// with IDENTIFY's presence (an invalid one is ignored: online).
func (w *gatewayPresence) SessionStarted(ctx context.Context, s event.Session, c gateway.ClientInfo) {
	st := presence.SessionState{
		Session: s.ID, UserID: s.UserID, Node: s.Node,
		Client: presence.ClientKind(c.OS, c.Browser), Status: presence.Online,
		Activities: []presence.Activity{}, UpdatedAt: time.Now(),
	}
	if c.Presence != nil {
		if u, err := presence.ParseUpdate(c.Presence); err == nil {
			st.Status, st.AFK, st.Activities = u.Status, u.AFK, u.Activities
		} else {
			w.log.Debug("identify presence ignored", "session_id", s.ID, "err", err)
		}
	}
	if err := w.sessions.Start(ctx, st); err != nil {
		// The next re-report carries the session.
		w.log.Warn("presence connect", "session_id", s.ID, "err", err)
	}
}

// SessionEnded implements gateway.SessionReporter.
func (w *gatewayPresence) SessionEnded(ctx context.Context, s event.Session) {
	w.sessions.End(ctx, s.ID)
}

// Report implements gateway.SessionReporter: the states of the node's
// sessions go to the presence node; states of sessions the node no
// longer holds are forgotten.
func (w *gatewayPresence) Report(ctx context.Context, node string, sessions []event.Session) {
	w.sessions.Report(ctx, node, sessions)
}

// opHandlers returns the gateway's op 3, 8 and 14 handlers.
func (w *gatewayPresence) opHandlers() map[int]gateway.OpHandler {
	return map[int]gateway.OpHandler{
		gateway.OpPresenceUpdate:      gateway.OpHandlerFunc(w.presenceUpdate),
		gateway.OpRequestGuildMembers: gateway.OpHandlerFunc(w.requestMembers),
		gateway.OpLazyRequest:         gateway.OpHandlerFunc(w.lazyRequest),
	}
}

// presenceUpdate handles op 3: invalid updates close with 4002, floods
// with 4008. An update the presence node cannot take (it is down) is
// kept as the session's state and reaches it with the next re-report.
func (w *gatewayPresence) presenceUpdate(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	u, err := presence.ParseUpdate(d)
	if err == nil {
		err = w.sessions.Apply(ctx, s.ID, u)
	}
	if c := presence.CloseCode(err); c != 0 {
		return &gateway.CloseError{Code: c, Reason: "presence"}
	}
	if err != nil {
		w.log.Warn("presence update", "session_id", s.ID, "err", err)
	}
	return nil
}

// lazyRequest handles op 14 on the guild's owner. A payload that does not
// decode closes with 4002; refusals are only logged.
func (w *gatewayPresence) lazyRequest(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	req, err := memberlist.ParseRequest(d)
	if err != nil {
		return &gateway.CloseError{Code: gateway.CloseDecodeError, Reason: "bad op 14"}
	}
	w.forward(ctx, s, req.GuildID, "op 14", w.guilds.LazyRequest, d)
	return nil
}

// requestMembers handles op 8 on the guild's owner. A payload that does
// not decode closes with 4002.
func (w *gatewayPresence) requestMembers(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	req, err := memberlist.ParseMembersRequest(d)
	if err != nil {
		return &gateway.CloseError{Code: gateway.CloseDecodeError, Reason: "bad op 8"}
	}
	w.forward(ctx, s, req.GuildID, "op 8", w.guilds.RequestMembers, d)
	return nil
}

// forward hands op (call) with the session and d to guildID's owner.
func (w *gatewayPresence) forward(ctx context.Context, s event.Session, guildID snowflake.ID, op string,
	call func(context.Context, snowflake.ID, event.Session, json.RawMessage) error, d json.RawMessage) {
	if err := call(ctx, guildID, s, d); err != nil {
		w.log.Info("gateway op not served by the guild owner", "op", op, "guild_id", guildID, "session_id", s.ID, "err", err)
	}
}
