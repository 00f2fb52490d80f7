package guild

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Voice states across a guild's move.
//
// Voice states live in the owner's actor. When the placement ring moves a
// guild to another guild node, or its node dies, the calls go on: the
// clients stay connected to their SFUs, which know every participant's
// channel, chat session, server mute and deafen and self mute and deafen.
// So the new owner's actor, the first time it needs its voice states,
// asks the fleet (VoiceRoster) for the participants of the guild's calls
// and rebuilds them from the answer, rather than from a copy in the
// store: the SFUs are where a call actually is, and a stored copy would
// keep users whose voice connection dropped while no node owned the
// guild. The sessions reattach to the new owner one by one; a rebuilt
// state whose session never does within VoiceConfig.AdoptGrace ends, as its session
// ended while the guild moved.

// VoiceParticipant is one user in a call, as the voice fleet reports it.
type VoiceParticipant struct {
	// Server hosts the call.
	Server    VoiceServer
	ChannelID snowflake.ID
	UserID    snowflake.ID
	// SessionID is the chat session the user joined from.
	SessionID          string
	Mute, Deaf         bool
	SelfMute, SelfDeaf bool
}

// VoiceRoster is the optional ability of an allocator to list who is in
// a guild's calls on its servers. A guild actor calls it once, when it
// first builds its voice states (after a load), with a bounded context.
type VoiceRoster interface {
	Roster(ctx context.Context, guildID snowflake.ID) ([]VoiceParticipant, error)
}

// VoiceSelfControl is the optional ability of an allocator to record a
// user's self mute and deafen at the user's server, so that a roster
// carries them.
type VoiceSelfControl interface {
	SetSelfVoiceState(ctx context.Context, server string, guildID, channelID, userID snowflake.ID, selfMute, selfDeaf bool)
}

// rosterTimeout bounds the roster query of an actor building its voice
// states: the actor waits for it, as it waits for its store load.
const rosterTimeout = 3 * time.Second

// adoptGrace is how long a rebuilt voice state waits for its session to
// attach to this node before it ends.
const adoptGrace = 30 * time.Second

// rebuildVoice fills a fresh actorVoice from the fleet's roster of the
// guild's calls.
func (a *Actor) rebuildVoice(vs *actorVoice) {
	v := a.svc.voice.Load()
	if v == nil {
		return
	}
	r, ok := v.Allocator.(VoiceRoster)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rosterTimeout)
	defer cancel()
	ps, err := r.Roster(ctx, a.id)
	if err != nil {
		// Partial answers are kept: the servers that answered are
		// rebuilt, the others' users rejoin (op 4) or are found missing.
		a.svc.log.Warn("voice roster incomplete", "guild_id", a.id, "participants", len(ps), "err", err)
	}
	if len(ps) == 0 {
		return
	}
	now := time.Now()
	// A call split over two servers (a move was under way) is placed on
	// the healthy server holding most of its participants; the failover
	// check sends the others there as their sessions attach.
	count := map[snowflake.ID]map[string]int{}
	servers := map[string]VoiceServer{}
	for _, p := range ps {
		if count[p.ChannelID] == nil {
			count[p.ChannelID] = map[string]int{}
		}
		count[p.ChannelID][p.Server.ID]++
		servers[p.Server.ID] = p.Server
	}
	for ch, byServer := range count {
		ids := make([]string, 0, len(byServer))
		for id := range byServer {
			ids = append(ids, id)
		}
		best := slices.MinFunc(ids, func(x, y string) int {
			hx, hy := v.Allocator.Healthy(x), v.Allocator.Healthy(y)
			if hx != hy {
				if hx {
					return -1
				}
				return 1
			}
			if byServer[x] != byServer[y] {
				return byServer[y] - byServer[x]
			}
			return strings.Compare(x, y)
		})
		vs.calls[ch] = servers[best]
	}
	adopted := 0
	for _, p := range ps {
		c := a.channels[p.ChannelID]
		_, member := a.members[p.UserID]
		if c == nil || !member || vs.states[p.UserID] != nil {
			// The channel went, the user left the guild while it moved,
			// or a second entry for the user: that connection ends.
			if vc, ok := v.Allocator.(VoiceControl); ok {
				if cur := vs.states[p.UserID]; cur == nil || cur.server != p.Server.ID || cur.channelID != p.ChannelID {
					vc.Disconnect(ctx, p.Server.ID, a.id, p.ChannelID, p.UserID)
				}
			}
			continue
		}
		vs.states[p.UserID] = &voiceState{userID: p.UserID, channelID: p.ChannelID, session: event.SessionID(p.SessionID),
			server: p.Server.ID, selfMute: p.SelfMute, selfDeaf: p.SelfDeaf, sent: now, adopted: now}
		if p.Mute {
			vs.mute[p.UserID] = true
		}
		if p.Deaf {
			vs.deaf[p.UserID] = true
		}
		adopted++
	}
	for ch := range vs.calls {
		if !slices.ContainsFunc(ps, func(p VoiceParticipant) bool { return p.ChannelID == ch && vs.states[p.UserID] != nil }) {
			delete(vs.calls, ch)
		}
	}
	if len(vs.calls) > 0 {
		v.guilds.Store(a.id, true)
	}
	v.rebuilt.Add(float64(adopted))
	a.svc.log.Info("voice states rebuilt from the fleet", "guild_id", a.id, "participants", adopted, "calls", len(vs.calls))
}

// voiceReconcile runs with the failover check: a rebuilt state whose
// session attached but whose server is not its call's (the call was split)
// is sent the call's server; one whose session never attached within
// adoptGrace ends.
func (a *Actor) voiceReconcile(ctx context.Context, v *voiceEnabled) {
	if a.voice == nil {
		return
	}
	now := time.Now()
	users := make([]snowflake.ID, 0, len(a.voice.states))
	for id, st := range a.voice.states {
		if !st.adopted.IsZero() {
			users = append(users, id)
		}
	}
	slices.Sort(users)
	for _, id := range users {
		st := a.voice.states[id]
		sub := a.subs[st.session]
		if sub == nil {
			if now.Sub(st.adopted) > v.AdoptGrace {
				a.voiceLeave(ctx, v, st)
				v.joins.WithLabelValues("left").Inc()
			}
			continue
		}
		st.adopted = time.Time{}
		if srv, ok := a.voice.calls[st.channelID]; ok && srv.ID != st.server {
			// As in a drain: the client moves on the new update, and the
			// old server ends the session when its socket closes.
			st.server = srv.ID
			if err := a.sendVoiceServer(ctx, v, sub.s, st, srv); err != nil {
				a.svc.log.Warn("voice reconcile", "guild_id", a.id, "user_id", st.userID, "err", err)
			}
		}
	}
}
