package guild

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Passive sessions (docs/api.md, "Passive sessions").
//
// A user session is passive in a guild with more members than the
// large_threshold it sent in IDENTIFY. It is active only in the channels
// its latest op 14 for the guild named; in every other channel it can view
// it gets no message, reaction or typing events, except a MESSAGE_CREATE
// that mentions it, and instead a PASSIVE_UPDATE_V1 naming the channels
// whose last message changed. Bots are never passive.
//
// The guild keeps one set of channels whose last message changed since its
// previous passive flush, not one per session: a busy guild changes a few
// channels per flush while it may hold 100,000 passive sessions, so the
// per-message cost is one set insert and the per-session work runs once
// per flush, at most every PassiveInterval, with each session's channel
// list computed from the permissions it has at flush time.

// PassiveUpdateType is the dispatch that tells a passive session which
// channels' last messages changed.
const PassiveUpdateType = "PASSIVE_UPDATE_V1"

// passiveInterval is the least time between two PASSIVE_UPDATE_V1 of one
// guild to one session; a change waits at most this long, inside the
// contract's 5 seconds.
const passiveInterval = 2 * time.Second

// defaultLargeThreshold is the large_threshold of a session that sent
// none (Discord's default).
const defaultLargeThreshold = 50

// actorPassive is a guild's passive-session state.
type actorPassive struct {
	// active holds, per session that sent an op 14 naming channels (or
	// an empty object), the channels it named last.
	active map[event.SessionID]map[snowflake.ID]bool
	// dirty holds the channels whose last message changed while a
	// passive session was left out, since the previous flush.
	dirty map[snowflake.ID]bool
	// pins is the last pin timestamp seen per channel since the guild
	// loaded (CHANNEL_PINS_UPDATE); channels without one report null.
	pins map[snowflake.ID]*wire.Timestamp
	// armed is set while a flush is scheduled.
	armed     bool
	lastFlush time.Time
}

// passiveState returns the guild's passive state, built on first use.
func (a *Actor) passiveState() *actorPassive {
	if a.passive == nil {
		a.passive = &actorPassive{
			active: make(map[event.SessionID]map[snowflake.ID]bool),
			dirty:  make(map[snowflake.ID]bool),
			pins:   make(map[snowflake.ID]*wire.Timestamp),
		}
	}
	return a.passive
}

// isPassive reports whether s is passive in this guild: a user session in
// a guild with more members than its large_threshold.
func (a *Actor) isPassive(s event.Session) bool {
	if s.Bot {
		return false
	}
	t := s.LargeThreshold
	if t <= 0 {
		t = defaultLargeThreshold
	}
	return len(a.members) > t
}

// activeIn reports whether s named channelID, or the channel a thread
// belongs to, in its latest op 14: a client showing a channel shows its
// threads' activity, and names the parent while a thread is on screen
// (the member list it shows is the parent's).
func (a *Actor) activeIn(s event.Session, channelID snowflake.ID) bool {
	if a.passive == nil {
		return false
	}
	set := a.passive.active[s.ID]
	if set[channelID] {
		return true
	}
	c, ok := a.channels[channelID]
	return ok && c.Thread != nil && set[c.ParentID]
}

// passiveSkips reports whether a message-content event of channelID
// (MESSAGE_UPDATE/DELETE, reactions, typing) is withheld from s.
func (a *Actor) passiveSkips(s event.Session, channelID snowflake.ID) bool {
	return a.isPassive(s) && !a.activeIn(s, channelID)
}

// passiveContent lists the channel events withheld from a passive session
// outside its active channels (MESSAGE_CREATE and MESSAGE_UPDATE are
// decided in fanoutMessage).
var passiveContent = map[string]bool{
	"MESSAGE_DELETE":                true,
	"MESSAGE_DELETE_BULK":           true,
	"MESSAGE_REACTION_ADD":          true,
	"MESSAGE_REACTION_REMOVE":       true,
	"MESSAGE_REACTION_REMOVE_ALL":   true,
	"MESSAGE_REACTION_REMOVE_EMOJI": true,
	"TYPING_START":                  true,
}

// mentionsSession reports whether m mentions s's user: by id, by one of
// its roles, or with @everyone/@here (mention_everyone is set only when
// the author may use them).
func (a *Actor) mentionsSession(m wire.Message, s event.Session) bool {
	if m.MentionEveryone || mentions(m, s.UserID) {
		return true
	}
	if len(m.MentionRoles) == 0 {
		return false
	}
	mem, ok := a.members[s.UserID]
	if !ok {
		return false
	}
	for _, r := range m.MentionRoles {
		if slices.Contains(mem.Roles, r) {
			return true
		}
	}
	return false
}

// setActive records a session's op 14 channels: the latest replaces the
// set; an empty one leaves the session fully passive. Channels the user
// cannot view are left out.
func (a *Actor) setActive(s event.Session, channels []snowflake.ID) {
	set := make(map[snowflake.ID]bool, len(channels))
	for _, ch := range channels {
		if a.canView(s.UserID, ch) {
			set[ch] = true
		}
	}
	a.passiveState().active[s.ID] = set
	if a.sliced != nil {
		a.sliceActive(context.Background(), s, set)
	}
}

// forgetPassive drops a departed session's active channels.
func (a *Actor) forgetPassive(id event.SessionID) {
	if a.passive != nil {
		delete(a.passive.active, id)
	}
}

// notePin records a channel's last pin timestamp from CHANNEL_PINS_UPDATE.
func (a *Actor) notePin(channelID snowflake.ID, payload any) {
	if u, ok := payload.(wire.ChannelPinsUpdate); ok {
		a.passiveState().pins[channelID] = u.LastPinTimestamp
	}
}

// markDirty notes that channelID's last message changed while a passive
// session was left out, and schedules a flush if none is: now when the
// previous flush is older than passiveInterval, else when it will be.
func (a *Actor) markDirty(channelID snowflake.ID) {
	p := a.passiveState()
	p.dirty[channelID] = true
	if p.armed {
		return
	}
	p.armed = true
	delay := max(passiveInterval-time.Since(p.lastFlush), 0)
	time.AfterFunc(delay, func() {
		ctx, cancel := context.WithTimeout(context.Background(), passiveInterval)
		defer cancel()
		a.svc.postLoaded(ctx, a, func(a *Actor) { a.flushPassive(ctx) })
	})
}

// passiveChannel is one entry of PASSIVE_UPDATE_V1's channels.
type passiveChannel struct {
	ID               snowflake.ID    `json:"id"`
	LastMessageID    *snowflake.ID   `json:"last_message_id"`
	LastPinTimestamp *wire.Timestamp `json:"last_pin_timestamp"`
}

// passiveUpdate is PASSIVE_UPDATE_V1's `d`.
type passiveUpdate struct {
	GuildID     snowflake.ID      `json:"guild_id"`
	Channels    []passiveChannel  `json:"channels"`
	VoiceStates []json.RawMessage `json:"voice_states"`
	Members     []json.RawMessage `json:"members"`
}

// flushPassive sends each passive session a PASSIVE_UPDATE_V1 listing the
// dirty channels it can view now and is not active in. Sessions with the
// same list share one payload and batch.
func (a *Actor) flushPassive(ctx context.Context) {
	p := a.passiveState()
	p.armed = false
	p.lastFlush = time.Now()
	if len(p.dirty) == 0 {
		return
	}
	dirty := make([]snowflake.ID, 0, len(p.dirty))
	for id := range p.dirty {
		if _, ok := a.channels[id]; ok {
			dirty = append(dirty, id)
		}
	}
	clear(p.dirty)
	slices.SortFunc(dirty, cmpID)
	groups := make(map[string]*batcher)
	var order []string
	sent := 0
	mask := make([]byte, len(dirty))
	for _, sub := range a.sortedSubs() {
		s := sub.s
		if !a.isPassive(s) {
			continue
		}
		n := 0
		for i, ch := range dirty {
			mask[i] = '0'
			if !a.activeIn(s, ch) && a.canView(s.UserID, ch) {
				mask[i] = '1'
				n++
			}
		}
		if n == 0 {
			continue
		}
		key := string(mask)
		b := groups[key]
		if b == nil {
			u := passiveUpdate{GuildID: a.id, Channels: make([]passiveChannel, 0, n), VoiceStates: []json.RawMessage{}, Members: []json.RawMessage{}}
			for i, ch := range dirty {
				if mask[i] == '1' {
					u.Channels = append(u.Channels, a.passiveChannel(ch))
				}
			}
			b = newBatcher(PassiveUpdateType, mustJSON(u))
			groups[key] = b
			order = append(order, key)
		}
		b.add(s, 0)
		sent++
	}
	a.svc.metrics.passiveUpdates.Add(float64(sent))
	slices.SortFunc(order, strings.Compare)
	for _, k := range order {
		groups[k].flushGuild(ctx, a)
	}
}

func (a *Actor) passiveChannel(id snowflake.ID) passiveChannel {
	c := passiveChannel{ID: id, LastPinTimestamp: a.passive.pins[id]}
	if last := a.channels[id].LastMessageID; last != 0 {
		c.LastMessageID = &last
	}
	return c
}

// postLoaded runs fn in a if it is still the guild's loaded actor; unlike
// post it never loads the guild again for work that belonged to an actor
// that has retired.
func (s *Service) postLoaded(ctx context.Context, a *Actor, fn func(a *Actor)) {
	s.mu.Lock()
	if s.closed || s.actors[a.id] != a {
		s.mu.Unlock()
		return
	}
	a.inflight.Add(1)
	s.mu.Unlock()
	_ = a.enqueue(ctx, func(a *Actor) {
		if a.failed == nil {
			fn(a)
		}
	})
}
