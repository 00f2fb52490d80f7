package presencerole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Presence is sharded by user on a consistent-hash ring over the live
// presence nodes (wiring.Ring over Name, the ring code guild placement
// uses). Each gateway sends a session's start, op 3 and end to its user's
// owner, and splits its periodic re-report by owner, so each presence
// node folds and broadcasts only the users it owns.
//
// Ownership moves when a presence node dies, joins or leaves. Presence is
// not stored: it is rebuilt from the gateways. Every gateway re-reports
// at once when its presence ring changes (GatewaySide.Resync, and again
// every report interval), so a user's new owner learns the user's
// sessions and broadcasts what differs from offline; the old owner
// forgets the users it lost without broadcasting (presence.Service.Forget)
// and ignores re-reports of users it does not own, so it never
// contradicts the new owner. Changes the dead owner could not take are
// not lost: an op 3 stays the session's state on its gateway and reaches
// the new owner with the re-report; a session that ended is remembered by
// its gateway with its user and told to the new owner, which then
// announces the user offline if no other session of theirs is live
// (presence.Service.DisconnectUser).

// buildService builds the presence service of a `concord serve
// --roles=presence` node: fed over PresenceNode (served through
// Builder.GRPC, refusing users the node does not own), broadcasting to
// friends' gateways and the guild owners, forgetting the users the ring
// moves away (part follow-ring). A fresh presence node (first start or
// restart after a crash) absorbs what gateways re-report for two report
// intervals without broadcasting it: the guild nodes kept the statuses
// it froze.
func buildService(ctx context.Context, b *wiring.Builder) (*ownedPresence, error) {
	cfg := b.Config
	log := b.Logger.With("component", "presence")
	ringCfg := registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")}
	psRing, err := wiring.Ring(ctx, b.Seams, b.Registry, Name, ringCfg)
	if err != nil {
		return nil, err
	}
	// The process's ports: the guild ring and GuildNode client, the
	// GatewayNode client (PRESENCE_UPDATE to friends' sessions) and the
	// session directory (friends' sessions on every gateway node).
	guildRing, ok1 := wiring.Lookup(b.Seams, wiring.Placement)
	guilds, ok2 := wiring.Lookup(b.Seams, wiring.GuildClient)
	sink, ok3 := wiring.Lookup(b.Seams, wiring.Gateways)
	dir, ok4 := wiring.Lookup(b.Seams, wiring.Sessions)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, errors.New("presence service: the process gives no guild ring, guild client, gateway client or session directory")
	}
	var pending sync.WaitGroup
	// The relationships of the users this node owns, which PresenceNode
	// also answers (the live gateway's friends boost).
	friends := presence.NewFriends(nil)
	router := &router{store: b.Store, guilds: guilds, ring: guildRing, sink: sink, sessions: dir, log: log, wg: &pending, timeout: cfg.CallTimeout}
	svc, err := presence.New(presence.Config{
		Window: cfg.Presence.Window, NodeTTL: 3 * cfg.Presence.ReportInterval, Warmup: 2 * cfg.Presence.ReportInterval,
		Now: cfg.Presence.Now, Registerer: b.Metrics, Logger: log,
	}, router, friends)
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	owned := &ownedPresence{self: cfg.Node, ring: psRing, svc: svc, friends: friends}
	if b.GRPC != nil {
		b.GRPC.Presence = owned
	}
	if tick := tickInterval(cfg.Presence); tick > 0 {
		if err := b.Add(lifecycle.Part{Name: "run", Run: func(ctx context.Context) error {
			lifecycle.Every(ctx, tick, svc.Tick)
			// The broadcasts in flight finish before the clients close.
			pending.Wait()
			return nil
		}}); err != nil {
			return nil, err
		}
	}
	if err := b.Add(lifecycle.Part{Name: "follow-ring", Run: func(ctx context.Context) error {
		followRing(ctx, psRing, cfg.Node, svc, log)
		return nil
	}}); err != nil {
		return nil, err
	}
	return owned, nil
}

// ownedPresence is what a presence node serves over PresenceNode: its
// service, limited to the users the node owns on its ring.
type ownedPresence struct {
	self    string
	ring    *registry.LocalRing
	svc     *presence.Service
	friends presence.Relationships
}

var (
	_ transport.PresenceBackend  = (*ownedPresence)(nil)
	_ transport.UserDisconnecter = (*ownedPresence)(nil)
	_ transport.FriendsBackend   = (*ownedPresence)(nil)
)

// Friends implements transport.FriendsBackend: the friends of a user this
// node owns; a user owned elsewhere is refused with transport.ErrNotOwner.
func (o *ownedPresence) Friends(ctx context.Context, user snowflake.ID) ([]snowflake.ID, error) {
	if !o.owns(user) {
		return nil, fmt.Errorf("%w: relationships of user %d", transport.ErrNotOwner, user)
	}
	return o.friends.Friends(ctx, user)
}

func (o *ownedPresence) owns(user snowflake.ID) bool {
	n, ok := o.ring.Owner(user)
	return ok && n.Name == o.self
}

// Connect implements transport.PresenceBackend; a user owned elsewhere
// is refused with transport.ErrNotOwner.
func (o *ownedPresence) Connect(ctx context.Context, st presence.SessionState) error {
	if !o.owns(st.UserID) {
		return fmt.Errorf("%w: presence of user %d", transport.ErrNotOwner, st.UserID)
	}
	return o.svc.Connect(ctx, st)
}

// Update implements transport.PresenceBackend: a session of a user this
// node forgot is unknown here (presence.ErrUnknownSession).
func (o *ownedPresence) Update(ctx context.Context, id event.SessionID, u presence.Update) error {
	return o.svc.Update(ctx, id, u)
}

// Disconnect implements transport.PresenceBackend.
func (o *ownedPresence) Disconnect(ctx context.Context, id event.SessionID) {
	o.svc.Disconnect(ctx, id)
}

// DisconnectUser implements transport.UserDisconnecter.
func (o *ownedPresence) DisconnectUser(ctx context.Context, id event.SessionID, user snowflake.ID) error {
	if !o.owns(user) {
		return fmt.Errorf("%w: presence of user %d", transport.ErrNotOwner, user)
	}
	o.svc.DisconnectUser(ctx, id, user)
	return nil
}

// Report implements transport.PresenceBackend: sessions of users owned
// elsewhere are dropped (the gateway's ring is behind this node's).
func (o *ownedPresence) Report(ctx context.Context, node string, sessions []presence.SessionState) {
	mine := sessions[:0:0]
	for _, st := range sessions {
		if o.owns(st.UserID) {
			mine = append(mine, st)
		}
	}
	o.svc.Report(ctx, node, mine)
}

// followRing forgets, on every change of the ring of presence nodes, the
// users this node no longer owns.
func followRing(ctx context.Context, ring *registry.LocalRing, self string, svc *presence.Service, log *slog.Logger) {
	for range ring.Changes(ctx) {
		n := svc.Forget(func(u snowflake.ID) bool {
			o, ok := ring.Owner(u)
			return ok && o.Name == self
		})
		log.Info("presence ring changed", "nodes", ring.View().Ring().Len(), "users_moved_away", n)
	}
}
