package voice

import (
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// The roster: an SFU is the one place that knows who is connected to its
// calls, so a guild whose actor starts on another guild node (the
// placement ring moved it, or its node died) rebuilds its voice states
// from the rosters of the servers hosting its calls rather than from a
// copy kept in the store, which would go stale the moment a client's
// voice connection dropped while no guild node owned the guild. For that
// the SFU keeps, per participant, everything a voice state holds: the
// channel, the chat session, the server mute and deafen the guild set and
// the self mute and deafen the user set (from the admission token, then
// from OpSelf commands).

// RosterEntry is one participant of a call, as a guild rebuilds its voice
// state from it.
type RosterEntry struct {
	ChannelID snowflake.ID `json:"channel_id"`
	UserID    snowflake.ID `json:"user_id"`
	// SessionID is the chat-gateway session the user joined from.
	SessionID string `json:"session_id"`
	Mute      bool   `json:"mute,omitempty"`
	Deaf      bool   `json:"deaf,omitempty"`
	SelfMute  bool   `json:"self_mute,omitempty"`
	SelfDeaf  bool   `json:"self_deaf,omitempty"`
}

// Roster lists the participants of guild's calls on this server, by
// channel then user.
func (s *Server) Roster(guild snowflake.ID) []RosterEntry {
	s.mu.Lock()
	var calls []*call
	for k, c := range s.calls {
		if k.guild == guild {
			calls = append(calls, c)
		}
	}
	s.mu.Unlock()
	out := []RosterEntry{}
	for _, c := range calls {
		for _, p := range c.snapshot() {
			out = append(out, RosterEntry{ChannelID: c.key.channel, UserID: p.userID, SessionID: p.sess.id,
				Mute: p.mute.Load(), Deaf: p.deaf.Load(), SelfMute: p.selfMute.Load(), SelfDeaf: p.selfDeaf.Load()})
		}
	}
	slices.SortFunc(out, func(a, b RosterEntry) int {
		if a.ChannelID != b.ChannelID {
			return cmpID(a.ChannelID, b.ChannelID)
		}
		return cmpID(a.UserID, b.UserID)
	})
	return out
}

func cmpID(a, b snowflake.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SetSelfVoiceState records a user's self mute and deafen (op 4 on the
// chat gateway) for the roster. It reports whether the user was connected.
func (s *Server) SetSelfVoiceState(guild, channel, user snowflake.ID, selfMute, selfDeaf bool) bool {
	applied, _ := s.setSelfState(guild, channel, user, selfMute, selfDeaf, s.cfg.Now())
	return applied
}

// setSelfState is setVoiceState for the self flags: the latest decision
// wins, and one recorded before the user joins applies to the join.
func (s *Server) setSelfState(guild, channel, user snowflake.ID, selfMute, selfDeaf bool, issued time.Time) (applied, stale bool) {
	return s.recordMod(s.selfs, guild, channel, user, voiceMod{mute: selfMute, deaf: selfDeaf, at: issued}, func(p *participant) {
		p.selfMute.Store(selfMute)
		p.selfDeaf.Store(selfDeaf)
	})
}

// joinSelfState is the self mute and deafen a joining user starts with:
// the token's, unless the guild recorded a later change.
func (s *Server) joinSelfState(c token.Claims) (selfMute, selfDeaf bool) {
	signed := c.ExpiresAt().Add(-token.TTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.selfs[modKey{c.GuildID, c.UserID}]; ok && m.at.After(signed) {
		return m.mute, m.deaf
	}
	return c.SelfMute, c.SelfDeaf
}

// hostedGuilds lists the guilds with a call on this server, ascending.
func (s *Server) hostedGuilds() []snowflake.ID {
	s.mu.Lock()
	seen := make(map[snowflake.ID]bool, len(s.calls))
	out := make([]snowflake.ID, 0, len(s.calls))
	for k := range s.calls {
		if !seen[k.guild] {
			seen[k.guild] = true
			out = append(out, k.guild)
		}
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out
}
