package presencerole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// shardedKey is the process's ring-sharded PresenceNode client (the
// gateway side's upstream), closed with the seams: after the gateway,
// whose closing sessions still tell it their ends.
var shardedKey = wiring.Key[*shardedPresence]{Name: "presence/client"}

// buildGatewaySide provides GatewayKey on a `concord serve` gateway node
// with --presence: sessions and op 3 go to the user's owner on the
// presence ring (in process when this node owns the user, owned non-nil),
// op 8 and op 14 to the guild's owner over GuildNode, and the gateway
// re-reports its sessions whenever the presence ring changes.
func buildGatewaySide(ctx context.Context, b *wiring.Builder, owned *ownedPresence) error {
	log := b.Logger.With("component", "presence")
	ring, err := wiring.Ring(ctx, b.Seams, b.Registry, Name, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
	if err != nil {
		return err
	}
	guilds, ok := wiring.Lookup(b.Seams, wiring.GuildClient)
	if !ok {
		return errors.New("no guild client in the process for op 8 and op 14")
	}
	client, err := wiring.Shared(b.Seams, shardedKey, func() (*shardedPresence, func() error, error) {
		c := newShardedPresence(b.ClientConfig, ring, log)
		if owned != nil {
			c.self, c.local = b.Config.Node, owned
		}
		return c, c.Close, nil
	})
	if err != nil {
		return err
	}
	// An update the user's presence node cannot take (it is down, or the
	// ring is moving the user) still stands: it reaches the owner with
	// the next re-report.
	sessions := presence.NewLocalSessions(presence.LocalSessionsConfig{
		Upstream: client,
		Now:      b.Config.Presence.Now,
		Deferred: func(err error) bool {
			return errors.Is(err, transport.ErrUnavailable) || errors.Is(err, transport.ErrNotOwner)
		},
	})
	gw := &Gateway{Sessions: sessions, Guilds: OwnerGuilds{Client: guilds}, Now: b.Config.Presence.Now, Logger: log}
	wiring.Provide(b.Seams, GatewayKey, GatewaySide{
		Presence:       gw,
		ReportInterval: b.Config.Presence.ReportInterval,
		// The users' new owners learn their sessions at once, without
		// waiting for the report interval.
		Resync: func(ctx context.Context, report func(context.Context)) {
			for range ring.Changes(ctx) {
				report(ctx)
			}
		},
	})
	return nil
}

// Relationships returns the platform's relationships as a `concord serve`
// process that holds none reads them: from each user's owner on the
// presence ring, over PresenceNode.Friends, through the process's
// ring-sharded presence client (shared with the gateway side when the
// process has one). The live gateway's friends boost uses it.
func Relationships(ctx context.Context, b *wiring.Builder) (presence.Relationships, error) {
	ring, err := wiring.Ring(ctx, b.Seams, b.Registry, Name, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
	if err != nil {
		return nil, err
	}
	return wiring.Shared(b.Seams, shardedKey, func() (*shardedPresence, func() error, error) {
		c := newShardedPresence(b.ClientConfig, ring, b.Logger.With("component", "presence"))
		return c, c.Close, nil
	})
}

// nodePlacement is a transport.Placement naming one node of a ring, so
// that a transport.PresenceClient calls that node.
type nodePlacement struct {
	ring *registry.LocalRing
	name string
}

// Owner implements transport.Placement.
func (p nodePlacement) Owner(snowflake.ID) (registry.Node, bool) { return p.ring.Node(p.name) }

// shardedPresence is a gateway node's presence.Upstream in `concord
// serve`: it sends each session's calls to its user's owner on the
// presence ring. It knows each live session's user (from Connect and the
// re-reports), and keeps the ends of sessions whose owner could not be
// told, to tell the owner the ring names next (with every re-report).
type shardedPresence struct {
	ring *registry.LocalRing
	cfg  transport.ClientConfig
	log  *slog.Logger
	// self and local: this node's own presence service, called in
	// process for the users it owns (local is nil without the role).
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
		return fmt.Errorf("presence of user %d: no presence node: %w", user, transport.ErrUnavailable)
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
		return fmt.Errorf("presence update of session %s: %w", id, presence.ErrUnknownSession)
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

// Friends implements presence.Relationships: userID's friends, asked of
// the user's owner on the presence ring.
func (p *shardedPresence) Friends(ctx context.Context, userID snowflake.ID) ([]snowflake.ID, error) {
	var ids []snowflake.ID
	err := p.call(userID, func(c transport.PresenceClient) (err error) {
		ids, err = c.Friends(ctx, userID)
		return err
	})
	return ids, err
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

// localPresence is this node's presence service as a
// transport.PresenceClient, for the users it owns: the calls stay in
// process.
type localPresence struct{ *ownedPresence }

// Close implements transport.PresenceClient; the service stops with the
// role's parts.
func (localPresence) Close() error { return nil }
