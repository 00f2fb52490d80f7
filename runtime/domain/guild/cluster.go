package guild

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// ErrMoved is returned by the operations an actor had not started when
// Unload stopped it: the guild now lives on another node. It matches
// ErrUnavailable too.
var ErrMoved = fmt.Errorf("%w: guild moved to another node", ErrUnavailable)

// AttachSession subscribes one session of a remote gateway node to one
// guild, as a guild node does for GuildNode.Subscribe: the actor (loaded
// from the store when needed) checks membership and sends the session a
// fresh GUILD_CREATE through the Sink, ordered before the guild's later
// events. A session already attached is attached again and gets a new
// GUILD_CREATE (the gateway asks again after the guild moved or a
// subscription was lost). It fails with ErrMissingAccess when the user is
// not a member, ErrUnknownGuild, or ErrUnavailable.
func (s *Service) AttachSession(ctx context.Context, guildID snowflake.ID, sess event.Session) error {
	s.register(sess, guildID)
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, ok := a.members[sess.UserID]; !ok {
			a.removeSub(sess.ID)
			return fmt.Errorf("attach %s: %w", sess.ID, ErrMissingAccess)
		}
		if !a.svc.attached(sess.ID, a.id) {
			return nil // a DetachSession overtook us
		}
		a.addSub(&subscriber{s: sess, visible: a.visibleChannels(sess.UserID)})
		a.sendTo(ctx, sess, "GUILD_CREATE", a.withPresences(ctx, sess, a.guildCreate(ctx, sess.UserID)))
		return nil
	})
	if err != nil {
		s.forgetSession(sess.ID, guildID)
		return fmt.Errorf("guild %d: %w", guildID, err)
	}
	return nil
}

// DetachSession unsubscribes one session from one guild, as a guild node
// does for GuildNode.Disconnect. It returns once the actor has dropped the
// subscriber, so every event of the guild the session will ever get has
// been handed to the Sink by then: a caller that tells the session it lost
// the guild (a revocation's GUILD_DELETE) after DetachSession returns
// tells it after the guild's last event. Detaching a session that is not
// attached is not an error. When ctx ends first the removal stays queued
// and the error is ErrUnavailable.
func (s *Service) DetachSession(ctx context.Context, guildID snowflake.ID, sess event.Session) error {
	s.mu.Lock()
	e := s.sessions[sess.ID]
	attached := e != nil && e.guilds[guildID]
	_, loaded := s.actors[guildID]
	s.mu.Unlock()
	s.forgetSession(sess.ID, guildID)
	if !attached || !loaded {
		return nil
	}
	a, err := s.actor(guildID)
	if err != nil {
		return err
	}
	// An actor that failed (unloaded, deleted) dropped its subscribers
	// already, so the removal is done either way; ctx bounds only the
	// wait, not the enqueue, so a cancelled caller still detaches.
	removed := make(chan struct{})
	if err := a.enqueue(context.WithoutCancel(ctx), func(a *Actor) {
		if a.failed == nil {
			a.removeSub(sess.ID)
		}
		close(removed)
	}); err != nil {
		return err
	}
	select {
	case <-removed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("detach %s from guild %d: %w: %w", sess.ID, guildID, ErrUnavailable, ctx.Err())
	case <-s.done:
		return fmt.Errorf("detach %s from guild %d: %w: service closed", sess.ID, guildID, ErrUnavailable)
	}
}

// forgetSession drops guildID from a session's entry and the entry when it
// has no guild left.
func (s *Service) forgetSession(id event.SessionID, guildID snowflake.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sessions[id]
	if e == nil {
		return
	}
	delete(e.guilds, guildID)
	if len(e.guilds) > 0 {
		return
	}
	delete(s.sessions, id)
	if m := s.users[e.s.UserID]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(s.users, e.s.UserID)
		}
	}
}

// Unload stops a guild's actor after the operations already in its
// mailbox, detaching its sessions; operations queued later fail with
// ErrMoved. A guild node calls it for every loaded guild the placement
// ring no longer gives it, so that only the owner runs a guild. Unloading
// a guild that is not loaded does nothing.
func (s *Service) Unload(ctx context.Context, guildID snowflake.ID) error {
	s.mu.Lock()
	_, loaded := s.actors[guildID]
	s.mu.Unlock()
	if !loaded {
		return nil
	}
	err := s.do(ctx, guildID, func(a *Actor) error {
		for id := range a.subs {
			a.svc.forgetSession(id, a.id)
		}
		a.subs = map[event.SessionID]*subscriber{}
		a.subsSorted = nil
		a.failed = ErrMoved
		a.svc.retire(a, true) // gone from the map when Unload returns
		return nil
	})
	if err != nil && !errors.Is(err, ErrUnknownGuild) {
		return fmt.Errorf("unload guild %d: %w", guildID, err)
	}
	s.log.Info("guild unloaded: placed on another node", "guild_id", guildID)
	return nil
}

// HasSession reports whether a session is attached to any guild of this
// service. A guild node uses it to end a session's typing focus once its
// last guild here detached it (SessionEnded).
func (s *Service) HasSession(id event.SessionID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id] != nil
}
