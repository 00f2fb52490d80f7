package presence

import (
	"github.com/concord-chat/concord/runtime/domain/event"
)

// IntentGuildPresences is the GUILD_PRESENCES gateway intent: bots receive
// PRESENCE_UPDATE only with it.
const IntentGuildPresences uint64 = 1 << 8

// Audience decides which of a guild's sessions receive a member's
// PRESENCE_UPDATE, by guild size:
//   - up to LargeThreshold members: every user session, and bots with
//     GUILD_PRESENCES;
//   - above it: only the sessions whose member-list ranges show the member
//     (memberlist.Guild.Viewers), and bots with GUILD_PRESENCES;
//   - above DropThreshold: only the sessions showing the member; the
//     guild keeps an approximate online count instead.
type Audience struct {
	// LargeThreshold is the member count above which a guild is large.
	// Default 250 (Discord's largest large_threshold).
	LargeThreshold int
	// DropThreshold is the member count above which presence reaches only
	// the sessions displaying the member. Default 75,000.
	DropThreshold int
}

func (a Audience) withDefaults() Audience {
	if a.LargeThreshold <= 0 {
		a.LargeThreshold = 250
	}
	if a.DropThreshold <= 0 {
		a.DropThreshold = 75000
	}
	return a
}

// Tier names how a guild of this size routes presence: "small", "large"
// or "huge".
func (a Audience) Tier(memberCount int) string {
	a = a.withDefaults()
	switch {
	case memberCount > a.DropThreshold:
		return "huge"
	case memberCount > a.LargeThreshold:
		return "large"
	}
	return "small"
}

// Select returns the recipients of one member's presence change. users
// and bots are the guild's connected sessions (users is read only for
// small guilds); viewers are the sessions whose ranges show the member.
// Each session appears once; the member's own sessions are included, as
// Discord does.
func (a Audience) Select(memberCount int, users, bots, viewers []event.Session) []event.Session {
	tier := a.Tier(memberCount)
	var out []event.Session
	seen := make(map[event.SessionID]bool)
	add := func(s event.Session) {
		if !seen[s.ID] {
			seen[s.ID] = true
			out = append(out, s)
		}
	}
	if tier == "small" {
		for _, s := range users {
			if !s.Bot {
				add(s)
			}
		}
	} else {
		for _, s := range viewers {
			if !s.Bot {
				add(s)
			}
		}
	}
	if tier != "huge" {
		for _, s := range bots {
			if s.Bot && s.Intents&IntentGuildPresences != 0 {
				add(s)
			}
		}
	}
	return out
}
