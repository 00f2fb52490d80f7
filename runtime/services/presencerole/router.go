package presencerole

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
)

// userSessions finds users' sessions on every gateway node (the session
// directory, transport.SessionDirectory): friends of a user may be owned
// by another presence node, so their sessions are looked up, not kept.
type userSessions interface {
	UserSessions(ctx context.Context, users []snowflake.ID) ([]event.Session, error)
}

// guildPresence is the call of the guild client a change goes to the
// guild owners with (transport.GuildClient).
type guildPresence interface {
	PresenceChanged(ctx context.Context, guildID, userID snowflake.ID, p presence.Presence) error
}

// router is a presence node's presence.Router in `concord serve`. Each
// broadcast runs in its own goroutine, so a slow guild node does not hold
// up the service's ticker.
type router struct {
	store    store.Guilds
	guilds   guildPresence
	ring     *registry.LocalRing
	sink     event.Sink
	sessions userSessions
	log      *slog.Logger
	wg       *sync.WaitGroup
	timeout  time.Duration
}

var _ presence.Router = (*router)(nil)

// Broadcast implements presence.Router.
func (r *router) Broadcast(_ context.Context, userID snowflake.ID, p presence.Presence, friends []snowflake.ID) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		r.broadcast(ctx, userID, p, friends)
	}()
}

// broadcast delivers PRESENCE_UPDATE (without guild_id) to the friends'
// sessions and calls GuildNode.PresenceChanged once per guild node owning
// one of the user's guilds.
func (r *router) broadcast(ctx context.Context, userID snowflake.ID, p presence.Presence, friends []snowflake.ID) {
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
