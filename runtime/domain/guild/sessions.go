package guild

import (
	"context"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// onShard reports whether a session's shard carries a guild: shard_id =
// (guild_id >> 22) % num_shards; private channels go to shard 0.
func onShard(s event.Session, guildID snowflake.ID) bool {
	if s.ShardCount <= 1 {
		return true
	}
	return int((uint64(guildID)>>22)%uint64(s.ShardCount)) == s.ShardID
}

// Identify verifies a token and intents and returns READY's parts
// (Reader.Identify on the service's reader). Errors:
// ErrAuthenticationFailed, ErrInvalidIntents, ErrInvalidShard, or
// ErrUnavailable wrapping a store failure.
func (s *Service) Identify(ctx context.Context, token string, sess event.Session) (event.Ready, error) {
	return s.reader.Identify(ctx, token, sess)
}

// Subscribe attaches an identified session to its guilds (on its shard)
// and to per-user routing for private channels. Each guild actor sends the
// session its GUILD_CREATE through the Sink, ordered with the guild's later
// events. A session subscribed again is first detached.
func (s *Service) Subscribe(ctx context.Context, sess event.Session) error {
	s.Disconnect(ctx, sess)
	e := &sessionEntry{s: sess, guilds: make(map[snowflake.ID]bool)}
	s.mu.Lock()
	s.sessions[sess.ID] = e
	if s.users[sess.UserID] == nil {
		s.users[sess.UserID] = make(map[event.SessionID]*sessionEntry)
	}
	s.users[sess.UserID][sess.ID] = e
	s.mu.Unlock()

	guilds, err := s.deps.Store.UserGuilds(ctx, sess.UserID)
	if err != nil {
		return storeErr("subscribe", err)
	}
	for _, g := range guilds {
		if onShard(sess, g) {
			s.attach(ctx, sess, g)
		}
	}
	return nil
}

// attach subscribes one session to one guild.
func (s *Service) attach(ctx context.Context, sess event.Session, guildID snowflake.ID) {
	s.mu.Lock()
	e := s.sessions[sess.ID]
	if e == nil || e.guilds[guildID] {
		s.mu.Unlock()
		return
	}
	e.guilds[guildID] = true
	s.mu.Unlock()
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, ok := a.members[sess.UserID]; !ok {
			return fmt.Errorf("subscribe %s: %w", sess.ID, ErrMissingAccess)
		}
		if _, ok := a.subs[sess.ID]; ok || !a.svc.attached(sess.ID, a.id) {
			return nil
		}
		a.addSub(&subscriber{s: sess, visible: a.visibleChannels(sess.UserID)})
		a.sendTo(ctx, sess, "GUILD_CREATE", a.withPresences(ctx, sess, a.guildCreate(ctx, sess.UserID)))
		return nil
	})
	if err != nil {
		s.detach(sess.ID, guildID)
		s.log.Debug("session not attached", "session_id", sess.ID, "guild_id", guildID, "err", err)
	}
}

// subscribeUser attaches every subscribed session of userID to a guild it
// just joined.
func (s *Service) subscribeUser(ctx context.Context, userID, guildID snowflake.ID) {
	if s.deps.Sessions != nil {
		// Through each session's gateway node, which records the guild
		// and subscribes on its owner (perhaps this process), so that it
		// resubscribes when the guild moves and detaches when the session
		// ends.
		for _, sess := range s.userSessions(ctx, userID) {
			if !onShard(sess, guildID) {
				continue
			}
			if _, err := s.deps.Sessions.SubscribeGuild(ctx, sess, guildID); err != nil {
				s.log.Warn("session not subscribed to a joined guild", "session_id", sess.ID, "guild_id", guildID, "err", err)
			}
		}
		return
	}
	s.mu.Lock()
	var list []event.Session
	for _, e := range s.users[userID] {
		if onShard(e.s, guildID) {
			list = append(list, e.s)
		}
	}
	s.mu.Unlock()
	for _, sess := range list {
		s.attach(ctx, sess, guildID)
	}
}

// detach forgets that a session is attached to a guild. Actors call it
// after removing the subscriber themselves; it never blocks on a mailbox.
func (s *Service) detach(id event.SessionID, guildID snowflake.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.sessions[id]; e != nil {
		delete(e.guilds, guildID)
	}
}

// attached reports whether a session is still registered for a guild; an
// actor checks it before adding a subscriber so that a racing Disconnect
// cannot leave one behind.
func (s *Service) attached(id event.SessionID, guildID snowflake.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sessions[id]
	return e != nil && e.guilds[guildID]
}

// Disconnect detaches a session from its guilds and private routing.
func (s *Service) Disconnect(ctx context.Context, sess event.Session) {
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	e := s.sessions[sess.ID]
	if e == nil {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, sess.ID)
	if m := s.users[e.s.UserID]; m != nil {
		delete(m, sess.ID)
		if len(m) == 0 {
			delete(s.users, e.s.UserID)
		}
	}
	guilds := make([]snowflake.ID, 0, len(e.guilds))
	for g := range e.guilds {
		guilds = append(guilds, g)
	}
	s.mu.Unlock()
	for _, g := range guilds {
		_ = s.post(ctx, g, func(a *Actor) { a.removeSub(sess.ID) })
	}
}

// userSessions returns the sessions of a user: those subscribed here
// and, with a session directory, those on every gateway node.
func (s *Service) userSessions(ctx context.Context, userID snowflake.ID) []event.Session {
	return s.usersSessions(ctx, []snowflake.ID{userID})[userID]
}

// directoryChunk bounds the users of one directory lookup (the gateway
// nodes accept 1024).
const directoryChunk = 512

// usersSessions is userSessions for several users with one directory
// lookup per directoryChunk users. A directory that answers in part is logged; what it found
// still counts.
func (s *Service) usersSessions(ctx context.Context, users []snowflake.ID) map[snowflake.ID][]event.Session {
	out := make(map[snowflake.ID][]event.Session, len(users))
	for _, u := range users {
		out[u] = s.localUserSessions(u)
	}
	if s.deps.Sessions == nil {
		return out
	}
	var found []event.Session
	for chunk := range slices.Chunk(users, directoryChunk) {
		f, err := s.deps.Sessions.UserSessions(ctx, chunk)
		if err != nil {
			s.log.Warn("session directory answered in part", "users", len(chunk), "found", len(f), "err", err)
		}
		found = append(found, f...)
	}
	for _, f := range found {
		list, asked := out[f.UserID]
		if asked && !slices.ContainsFunc(list, func(e event.Session) bool { return e.ID == f.ID }) {
			out[f.UserID] = append(list, f)
		}
	}
	return out
}

// localUserSessions returns the sessions of a user subscribed here.
func (s *Service) localUserSessions(userID snowflake.ID) []event.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]event.Session, 0, len(s.users[userID]))
	for _, e := range s.users[userID] {
		out = append(out, e.s)
	}
	return out
}
