package gatewayrole

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// The session directory of a cluster: events aimed at one user rather
// than a guild (DMs and group DMs, MESSAGE_ACK, a bot's interactions in a
// DM, a guild joined mid-session) must reach every session of the user,
// on whichever gateway node it is. Guild nodes know only the sessions
// subscribed to the guilds they own, so they ask the directory
// (guild.Deps.Sessions): transport.SessionDirectory asks every live
// gateway node of the registry, and each answers from the index below.
// Deriving it from the registry keeps nothing to reconcile: a session is
// in its node's index from Subscribe (before READY) to its end, moves
// with a hand-off (Release/Adopt), and a dead node's sessions vanish
// with its registration.

// userIndex is a gateway node's sessions by user.
type userIndex struct {
	mu       sync.Mutex
	sessions map[event.SessionID]event.Session
	byUser   map[snowflake.ID][]event.SessionID
}

func newUserIndex() userIndex {
	return userIndex{sessions: make(map[event.SessionID]event.Session), byUser: make(map[snowflake.ID][]event.SessionID)}
}

func (x *userIndex) put(s event.Session) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(s.ID)
	x.sessions[s.ID] = s
	x.byUser[s.UserID] = append(x.byUser[s.UserID], s.ID)
}

func (x *userIndex) remove(id event.SessionID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(id)
}

func (x *userIndex) removeLocked(id event.SessionID) {
	s, ok := x.sessions[id]
	if !ok {
		return
	}
	delete(x.sessions, id)
	ids := slices.DeleteFunc(x.byUser[s.UserID], func(e event.SessionID) bool { return e == id })
	if len(ids) == 0 {
		delete(x.byUser, s.UserID)
	} else {
		x.byUser[s.UserID] = ids
	}
}

func (x *userIndex) get(id event.SessionID) (event.Session, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.sessions[id]
	return s, ok
}

func (x *userIndex) of(users []snowflake.ID) []event.Session {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []event.Session
	for _, u := range users {
		for _, id := range x.byUser[u] {
			out = append(out, x.sessions[id])
		}
	}
	return out
}

var _ transport.SessionBackend = (*ringBackend)(nil)

// UserSessions implements transport.SessionBackend.
func (b *ringBackend) UserSessions(_ context.Context, users []snowflake.ID) []event.Session {
	return b.users.of(users)
}

// SubscribeGuild implements transport.SessionBackend: the guild is
// recorded for the session, as at IDENTIFY, and subscribed on its owner,
// which sends GUILD_CREATE; a failed subscription is retried by follow.
// A session that is not on the guild's shard is left alone.
func (b *ringBackend) SubscribeGuild(ctx context.Context, id event.SessionID, g snowflake.ID) (bool, error) {
	s, ok := b.users.get(id)
	if !ok {
		return false, nil
	}
	if !onShard(s, g) {
		return true, nil
	}
	b.mu.Lock()
	if _, ok := b.bySess[s.ID]; !ok {
		b.mu.Unlock()
		return false, nil // ended meanwhile
	}
	if !slices.Contains(b.bySess[s.ID], g) {
		b.bySess[s.ID] = append(b.bySess[s.ID], g)
	}
	if b.byGuild[g] == nil {
		b.byGuild[g] = make(map[event.SessionID]*subscription)
	}
	// A fresh entry even when one is left over (the user left the guild
	// and joined again): the owner is asked again either way.
	if sub := b.byGuild[g][s.ID]; sub != nil {
		sub.ok = false
		sub.gen++
		sub.attached = false // a join: GUILD_CREATE, not a move's replay
	} else {
		b.byGuild[g][s.ID] = &subscription{s: s}
	}
	b.mu.Unlock()
	b.subscribe(ctx, g, s)
	return true, nil
}

// leavingSink is the event.Sink a gateway node serves GatewayNode.Deliver
// with: it hands every batch to the node, and first notes the guilds a
// GUILD_DELETE takes from a session (the user left, was kicked or banned,
// the guild was deleted; not an outage, which says unavailable), so the
// node stops following them: no resubscription when the ring moves the
// guild, no detach when the session ends. The owner has already dropped
// the subscriber.
type leavingSink struct {
	next    event.Sink
	backend *ringBackend
}

// Deliver implements event.Sink.
func (s leavingSink) Deliver(ctx context.Context, node string, b event.Batch) {
	if b.Type == "GUILD_DELETE" {
		for _, t := range b.Targets {
			if t.Variant < 0 || t.Variant >= len(b.Payloads) {
				continue
			}
			var g struct {
				ID          snowflake.ID `json:"id"`
				Unavailable bool         `json:"unavailable"`
			}
			if json.Unmarshal(b.Payloads[t.Variant], &g) == nil && g.ID != 0 && !g.Unavailable {
				s.backend.forgetGuild(t.Session, g.ID)
			}
		}
	}
	s.next.Deliver(ctx, node, b)
}

// forgetGuild drops one guild of a session without detaching it on the
// owner.
func (b *ringBackend) forgetGuild(id event.SessionID, g snowflake.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(g, id)
	if ids, ok := b.bySess[id]; ok {
		b.bySess[id] = slices.DeleteFunc(ids, func(e snowflake.ID) bool { return e == g })
	}
}
