package presence

import (
	"context"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Presence can be sharded by user over several services (a cluster runs
// two or more presence nodes on a ring): each service then holds only
// the sessions of the users it owns, and the two methods below keep it so
// when ownership moves. A user's new owner learns the user's sessions
// from the gateways' re-reports, which are live changes there (the
// owner's warmup only covers its own start), so it broadcasts whatever
// differs from offline; an old owner forgets the users it lost without
// broadcasting anything, so it never contradicts the new owner.

// Forget drops, silently, every user owned reports false for: their
// sessions, node entries and pending broadcasts. It returns how many
// users were dropped. A cluster calls it when the ring of presence
// nodes moves users to another node.
func (s *Service) Forget(owned func(snowflake.ID) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for uid, u := range s.users {
		if owned(uid) {
			continue
		}
		for id, ss := range u.sessions {
			delete(s.sessions, id)
			if nd := s.nodes[ss.st.Node]; nd != nil {
				delete(nd.sessions, id)
			}
			s.m.sessions.Dec()
		}
		// A queued broadcast finds no user and is skipped (Tick).
		delete(s.users, uid)
		n++
	}
	return n
}

// DisconnectUser forgets session id of user, as Disconnect does. When the
// service does not know the session and the user has no other session
// here, the session ended while the user's owner could not be told (it
// died, or ownership was moving): what the guilds last saw of the user
// is unknown, so the user's presence — offline unless a session comes
// meanwhile — is broadcast after the window even if it looks unchanged.
func (s *Service) DisconnectUser(ctx context.Context, id event.SessionID, userID snowflake.ID) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[id]; ok || userID == 0 {
		s.remove(id, now)
		return
	}
	u := s.users[userID]
	if u == nil {
		u = &user{sessions: make(map[event.SessionID]*session)}
		s.users[userID] = u
	}
	if len(u.sessions) > 0 {
		return
	}
	// An empty Status equals no folded presence: the next fold is sent.
	u.last = Presence{}
	s.schedule(userID, u, now, false)
}
