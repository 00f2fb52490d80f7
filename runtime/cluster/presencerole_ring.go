package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
)

// Presence is sharded by user on a consistent-hash ring over the live
// presence nodes (a registry.LocalRing over RolePresence, the ring code
// guild placement uses). Each gateway sends a session's start, op 3 and
// end to its user's owner, and splits its periodic re-report by owner,
// so each presence node folds and broadcasts only the users it owns.
//
// Ownership moves when a presence node dies, joins or leaves. Presence is
// not stored: it is rebuilt from the gateways. Every gateway re-reports
// at once when its presence ring changes (and again every report
// interval), so a user's new owner learns the user's sessions and
// broadcasts what differs from offline; the old owner forgets the users
// it lost without broadcasting (presence.Service.Forget) and ignores
// re-reports of users it does not own, so it never contradicts the new
// owner. Changes the dead owner could not take are not lost: an op 3 stays
// the session's state on its gateway and reaches the new owner with the
// re-report; a session that ended is remembered by its gateway with its
// user and told to the new owner, which then announces the user offline
// if no other session of theirs is live (presence.Service.DisconnectUser).

// ownedPresence is what a presence node serves over PresenceNode: its
// service, limited to the users the node owns on its ring.
type ownedPresence struct {
	self string
	ring *registry.LocalRing
	svc  *presence.Service
}

var (
	_ transport.PresenceBackend  = ownedPresence{}
	_ transport.UserDisconnecter = ownedPresence{}
)

func (o ownedPresence) owns(user snowflake.ID) bool {
	n, ok := o.ring.Owner(user)
	return ok && n.Name == o.self
}

// Connect implements transport.PresenceBackend; a user owned elsewhere
// is refused with transport.ErrNotOwner.
func (o ownedPresence) Connect(ctx context.Context, st presence.SessionState) error {
	if !o.owns(st.UserID) {
		return fmt.Errorf("%w: presence of user %d", transport.ErrNotOwner, st.UserID)
	}
	return o.svc.Connect(ctx, st)
}

// Update implements transport.PresenceBackend: a session of a user this
// node forgot is unknown here (presence.ErrUnknownSession).
func (o ownedPresence) Update(ctx context.Context, id event.SessionID, u presence.Update) error {
	return o.svc.Update(ctx, id, u)
}

// Disconnect implements transport.PresenceBackend.
func (o ownedPresence) Disconnect(ctx context.Context, id event.SessionID) {
	o.svc.Disconnect(ctx, id)
}

// DisconnectUser implements transport.UserDisconnecter.
func (o ownedPresence) DisconnectUser(ctx context.Context, id event.SessionID, user snowflake.ID) error {
	if !o.owns(user) {
		return fmt.Errorf("%w: presence of user %d", transport.ErrNotOwner, user)
	}
	o.svc.DisconnectUser(ctx, id, user)
	return nil
}

// Report implements transport.PresenceBackend: sessions of users owned
// elsewhere are dropped (the gateway's ring is behind this node's).
func (o ownedPresence) Report(ctx context.Context, node string, sessions []presence.SessionState) {
	mine := sessions[:0:0]
	for _, st := range sessions {
		if o.owns(st.UserID) {
			mine = append(mine, st)
		}
	}
	o.svc.Report(ctx, node, mine)
}

// followPresenceRing forgets, on every change of the ring of presence
// nodes, the users this node no longer owns.
func followPresenceRing(ctx context.Context, ring *registry.LocalRing, self string, svc *presence.Service, log *slog.Logger) {
	for range ring.Changes(ctx) {
		n := svc.Forget(func(u snowflake.ID) bool {
			o, ok := ring.Owner(u)
			return ok && o.Name == self
		})
		log.Info("presence ring changed", "nodes", ring.View().Ring().Len(), "users_moved_away", n)
	}
}

// nodePlacement is a transport.Placement naming one node of a ring, so
// that a transport.PresenceClient calls that node.
type nodePlacement struct {
	ring *registry.LocalRing
	name string
}

// Owner implements transport.Placement.
func (p nodePlacement) Owner(snowflake.ID) (registry.Node, bool) { return p.ring.Node(p.name) }

// shardedPresence is a gateway node's presence.Upstream in a cluster: it
// sends each session's calls to its user's owner on the presence ring.
// It knows each live session's user (from Connect and the re-reports),
// and keeps the ends of sessions whose owner could not be told, to tell
// the owner the ring names next (with every re-report).
type shardedPresence struct {
	ring *registry.LocalRing
	cfg  transport.ClientConfig
	log  *slog.Logger
	// self and local: this node's own presence role, called in-process
	// for the users it owns (local is nil without the role).
	self  string
	local *ownedPresence

	mu      sync.Mutex
	clients map[string]transport.PresenceClient
	users   map[event.SessionID]snowflake.ID
	lost    map[event.SessionID]snowflake.ID
}

var _ presence.Upstream = (*shardedPresence)(nil)

// maxLostSessionEnds bounds the session ends a gateway keeps while no
// presence node takes them; beyond it, a user may show online until the
// next change.
const maxLostSessionEnds = 100_000

func newShardedPresence(cfg transport.ClientConfig, ring *registry.LocalRing, log *slog.Logger) *shardedPresence {
	return &shardedPresence{ring: ring, cfg: cfg, log: log,
		clients: make(map[string]transport.PresenceClient),
		users:   make(map[event.SessionID]snowflake.ID),
		lost:    make(map[event.SessionID]snowflake.ID),
	}
}

// client returns the client of the presence node called name.
func (p *shardedPresence) client(name string) transport.PresenceClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[name]
	if !ok {
		if p.local != nil && name == p.self {
			return localPresence{p.local}
		}
		c = transport.NewPresenceClient(p.cfg, nodePlacement{ring: p.ring, name: name})
		p.clients[name] = c
	}
	return c
}

// call runs fn on the client of user's owner, and once more on the
// ring's owner then if the first failed with a retryable error (the
// owner died or the ring moved) and the ring now names another node.
func (p *shardedPresence) call(user snowflake.ID, fn func(transport.PresenceClient) error) error {
	n, ok := p.ring.Owner(user)
	if !ok {
		return fmt.Errorf("cluster: presence of user %d: no presence node: %w", user, transport.ErrUnavailable)
	}
	err := fn(p.client(n.Name))
	if err != nil && (errors.Is(err, transport.ErrUnavailable) || errors.Is(err, transport.ErrNotOwner)) {
		if next, ok := p.ring.Owner(user); ok && next.Name != n.Name {
			err = fn(p.client(next.Name))
		}
	}
	return err
}

// user returns the user of session id.
func (p *shardedPresence) user(id event.SessionID) (snowflake.ID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u, ok := p.users[id]
	return u, ok
}

// Connect implements presence.Upstream.
func (p *shardedPresence) Connect(ctx context.Context, st presence.SessionState) error {
	p.mu.Lock()
	p.users[st.Session] = st.UserID
	delete(p.lost, st.Session)
	p.mu.Unlock()
	return p.call(st.UserID, func(c transport.PresenceClient) error { return c.Connect(ctx, st) })
}

// Update implements presence.Upstream.
func (p *shardedPresence) Update(ctx context.Context, id event.SessionID, u presence.Update) error {
	user, ok := p.user(id)
	if !ok {
		return fmt.Errorf("cluster: presence update of session %s: %w", id, presence.ErrUnknownSession)
	}
	return p.call(user, func(c transport.PresenceClient) error { return c.Update(ctx, id, u) })
}

// Disconnect implements presence.Upstream. An end the owner could not
// take is kept for the next owner.
func (p *shardedPresence) Disconnect(ctx context.Context, id event.SessionID) {
	p.mu.Lock()
	user, ok := p.users[id]
	delete(p.users, id)
	p.mu.Unlock()
	if !ok {
		return
	}
	if err := p.call(user, func(c transport.PresenceClient) error { return c.DisconnectUser(ctx, id, user) }); err != nil {
		p.mu.Lock()
		if len(p.lost) < maxLostSessionEnds {
			p.lost[id] = user
		}
		p.mu.Unlock()
		p.log.Info("presence session end kept for the user's next owner", "session_id", id, "user_id", user, "err", err)
	}
}

// Report implements presence.Upstream: every live presence node gets the
// sessions of the users it owns (possibly none, so it drops sessions that
// ended or moved), then the kept session ends are told to their owners.
func (p *shardedPresence) Report(ctx context.Context, node string, sessions []presence.SessionState) {
	view := p.ring.View()
	byOwner := make(map[string][]presence.SessionState)
	for _, n := range view.Nodes() {
		byOwner[n.Name] = nil
	}
	users := make(map[event.SessionID]snowflake.ID, len(sessions))
	for _, st := range sessions {
		users[st.Session] = st.UserID
		if n, ok := view.Owner(st.UserID); ok {
			byOwner[n.Name] = append(byOwner[n.Name], st)
		}
	}
	p.mu.Lock()
	p.users = users
	lost := make(map[event.SessionID]snowflake.ID, len(p.lost))
	for id, u := range p.lost {
		lost[id] = u
	}
	p.mu.Unlock()
	for name, list := range byOwner {
		p.client(name).Report(ctx, node, list)
	}
	for id, user := range lost {
		if err := p.call(user, func(c transport.PresenceClient) error { return c.DisconnectUser(ctx, id, user) }); err != nil {
			continue
		}
		p.mu.Lock()
		delete(p.lost, id)
		p.mu.Unlock()
	}
}

// Close closes every client.
func (p *shardedPresence) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, c := range p.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// localPresence is this node's presence role as a transport.PresenceClient,
// for the users it owns: the calls stay in-process.
type localPresence struct{ *ownedPresence }

// DisconnectUser implements transport.PresenceClient.
func (l localPresence) DisconnectUser(ctx context.Context, id event.SessionID, user snowflake.ID) error {
	return l.ownedPresence.DisconnectUser(ctx, id, user)
}

// Close implements transport.PresenceClient; the role is closed with the
// node.
func (localPresence) Close() error { return nil }

// followGatewayPresenceRing re-reports the gateway's sessions at once
// whenever the ring of presence nodes changes, so the users' new owners
// learn their sessions without waiting for the report interval.
func followGatewayPresenceRing(ctx context.Context, ring *registry.LocalRing, report func(context.Context)) {
	for range ring.Changes(ctx) {
		report(ctx)
	}
}
