package memberlist

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// EveryoneList is the list id of channels whose overwrites do not touch
// VIEW_CHANNEL: everyone who can see the guild's default channels sees
// them, as in Discord.
const EveryoneList = "everyone"

// ViewOverwrite is the VIEW_CHANNEL part of one channel permission
// overwrite.
type ViewOverwrite struct {
	// ID is the role or member the overwrite applies to.
	ID snowflake.ID
	// Member is true for a member overwrite (type 1).
	Member bool
	// Allow and Deny say whether the overwrite allows or denies
	// VIEW_CHANNEL.
	Allow, Deny bool
}

// GroupKey returns the list id of a channel from the VIEW_CHANNEL parts of
// its overwrites (the rest of who-can-view comes from guild-wide role
// permissions, the same for every channel): channels with the same set
// share one list. Overwrites that neither allow nor deny VIEW_CHANNEL are
// ignored, so a channel without any is EveryoneList. The result does not
// depend on the overwrites' order.
func GroupKey(ows []ViewOverwrite) string {
	rel := make([]ViewOverwrite, 0, len(ows))
	for _, o := range ows {
		if o.Allow || o.Deny {
			rel = append(rel, o)
		}
	}
	if len(rel) == 0 {
		return EveryoneList
	}
	slices.SortFunc(rel, func(a, b ViewOverwrite) int {
		switch {
		case a.ID != b.ID:
			if a.ID < b.ID {
				return -1
			}
			return 1
		case a.Member != b.Member:
			if b.Member {
				return -1
			}
			return 1
		}
		return 0
	})
	h := fnv.New64a()
	var buf [10]byte
	for _, o := range rel {
		id := uint64(o.ID)
		for i := range 8 {
			buf[i] = byte(id >> (8 * i))
		}
		buf[8] = 0
		if o.Member {
			buf[8] = 1
		}
		buf[9] = 0
		if o.Allow {
			buf[9] |= 1
		}
		if o.Deny {
			buf[9] |= 2
		}
		h.Write(buf[:])
	}
	return strconv.FormatUint(h.Sum64(), 10)
}

// Viewer answers whether a user can view a channel now. The guild actor
// implements it with its permission engine.
type Viewer interface {
	CanView(userID, channelID snowflake.ID) bool
}

// GuildConfig configures a guild's lists.
type GuildConfig struct {
	// List configures each list.
	List Config
	// MaxChannels is how many channels one op 14 may name and how many
	// lists one session may hold ranges in. Default 5.
	MaxChannels int
}

// Guild holds the member lists of one guild: one List per visibility
// group, the channels mapped onto them, and each session's subscriptions.
// It is owned by the guild actor and not safe for concurrent use.
type Guild struct {
	id          snowflake.ID
	cfg         GuildConfig
	viewer      Viewer
	hoisted     []Role
	memberCount int
	members     map[snowflake.ID]Member
	channels    map[snowflake.ID]string
	lists       map[string]*List
	reps        map[string]snowflake.ID // list id → its lowest channel id
	// sessions maps a session to its subscriptions, per list.
	sessions map[event.SessionID]map[string]held
	seq      uint64
}

// held is one session's subscription to one list: the channel it came
// through and when, for evicting the oldest.
type held struct {
	channel snowflake.ID
	seq     uint64
}

// NewGuild returns a guild's lists with no channels and no members.
func NewGuild(guildID snowflake.ID, viewer Viewer, hoisted []Role, cfg GuildConfig) *Guild {
	cfg.List.fill()
	if cfg.MaxChannels <= 0 {
		cfg.MaxChannels = 5
	}
	return &Guild{
		id:       guildID,
		cfg:      cfg,
		viewer:   viewer,
		hoisted:  slices.Clone(hoisted),
		members:  make(map[snowflake.ID]Member),
		channels: make(map[snowflake.ID]string),
		lists:    make(map[string]*List),
		reps:     make(map[string]snowflake.ID),
		sessions: make(map[event.SessionID]map[string]held),
	}
}

// List returns the list a channel belongs to, or nil.
func (g *Guild) List(channelID snowflake.ID) *List {
	return g.lists[g.channels[channelID]]
}

// Lists returns how many lists the guild holds.
func (g *Guild) Lists() int { return len(g.lists) }

// SetMemberCount sets the guild's member count reported in payloads.
func (g *Guild) SetMemberCount(n int) {
	g.memberCount = n
	for _, l := range g.lists {
		l.SetMemberCount(n)
	}
}

// representative returns the channel whose visibility stands for list id.
func (g *Guild) representative(id string) (snowflake.ID, bool) {
	ch, ok := g.reps[id]
	return ch, ok
}

// recomputeRep picks list id's representative channel again.
func (g *Guild) recomputeRep(id string) {
	var best snowflake.ID
	found := false
	for ch, lid := range g.channels {
		if lid == id && (!found || ch < best) {
			best, found = ch, true
		}
	}
	if found {
		g.reps[id] = best
	} else {
		delete(g.reps, id)
	}
}

// SetChannel places a channel in the list listID (from GroupKey), creating
// the list from the known members if it is new. Call it when a channel is
// created or its overwrites change, then Refresh if overwrites changed.
func (g *Guild) SetChannel(channelID snowflake.ID, listID string) {
	old, had := g.channels[channelID]
	if had && old == listID {
		return
	}
	g.channels[channelID] = listID
	g.recomputeRep(listID)
	if had {
		g.recomputeRep(old)
		g.dropListIfUnused(old)
	}
	if g.lists[listID] != nil {
		return
	}
	l := New(g.id, listID, g.hoisted, g.cfg.List)
	l.SetMemberCount(g.memberCount)
	for _, m := range g.members {
		if g.viewer.CanView(m.UserID, channelID) {
			l.Upsert(m)
		}
	}
	g.lists[listID] = l
}

// RemoveChannel forgets a deleted channel; a list left without channels
// is dropped with its subscriptions.
func (g *Guild) RemoveChannel(channelID snowflake.ID) {
	id, ok := g.channels[channelID]
	if !ok {
		return
	}
	delete(g.channels, channelID)
	g.recomputeRep(id)
	g.dropListIfUnused(id)
}

func (g *Guild) dropListIfUnused(id string) {
	if _, used := g.representative(id); used {
		return
	}
	delete(g.lists, id)
	for _, subs := range g.sessions {
		delete(subs, id)
	}
}

// Upsert adds or changes a member in every list whose channels it can
// view and removes it from the others. An offline member is forgotten
// unless lists show offline members, so the guild keeps only online ones.
func (g *Guild) Upsert(m Member) Dispatch {
	if m.Status == StatusOffline && !g.cfg.List.ShowOffline {
		return g.Remove(m.UserID)
	}
	g.members[m.UserID] = m
	var d Dispatch
	for id, l := range g.lists {
		if ch, ok := g.representative(id); ok && g.viewer.CanView(m.UserID, ch) {
			d.Merge(l.Upsert(m))
		} else {
			d.Merge(l.Remove(m.UserID))
		}
	}
	return d
}

// Remove deletes a member from every list (it left, or went offline in a
// guild that does not show offline members).
func (g *Guild) Remove(userID snowflake.ID) Dispatch {
	delete(g.members, userID)
	var d Dispatch
	for _, l := range g.lists {
		d.Merge(l.Remove(userID))
	}
	return d
}

// SetRoles replaces the hoisted roles of every list.
func (g *Guild) SetRoles(hoisted []Role) Dispatch {
	g.hoisted = slices.Clone(hoisted)
	var d Dispatch
	for _, l := range g.lists {
		d.Merge(l.SetRoles(hoisted))
	}
	return d
}

// Refresh re-evaluates which subscriptions remain visible and who is in
// each list, after role permissions or overwrites changed. A session whose
// user can no longer view the channel it subscribed through first gets an
// INVALIDATE of its ranges and loses the subscription, so it receives
// nothing of the list's later changes. It costs O(members × lists).
func (g *Guild) Refresh() Dispatch {
	var d Dispatch
	for sid, subs := range g.sessions {
		for lid, h := range subs {
			ch := h.channel
			l := g.lists[lid]
			if l == nil {
				delete(subs, lid)
				continue
			}
			s := l.subs[sid]
			if s == nil {
				delete(subs, lid)
				continue
			}
			if g.channels[ch] == lid && g.viewer.CanView(s.s.UserID, ch) {
				continue
			}
			l.begin()
			l.step++
			for _, r := range s.ranges {
				l.emit(s, Op{Op: OpInvalidate, Range: r})
			}
			d.Merge(l.finish())
			l.Unsubscribe(sid)
			delete(subs, lid)
		}
	}
	for _, m := range g.members {
		d.Merge(g.Upsert(m))
	}
	return d
}

// Subscribe applies an op 14 `channels` map for a session: for each
// channel the user can view, the session's ranges in that channel's list
// are replaced. Channels the user cannot view or that do not exist are
// skipped, and channels beyond MaxChannels in one request refused; the
// error joins every refusal, and the Dispatch (SYNCs) is valid either
// way. A session holding MaxChannels lists that subscribes to another
// loses its oldest subscription (a client that moved on).
func (g *Guild) Subscribe(s event.Session, channels map[snowflake.ID][]Range) (Dispatch, error) {
	ids := make([]snowflake.ID, 0, len(channels))
	for ch := range channels {
		ids = append(ids, ch)
	}
	slices.Sort(ids)
	var d Dispatch
	var errs []error
	subs := g.sessions[s.ID]
	for i, ch := range ids {
		if i >= g.cfg.MaxChannels {
			errs = append(errs, fmt.Errorf("memberlist: %d channels: %w", len(ids), ErrTooManyChannels))
			break
		}
		lid, ok := g.channels[ch]
		if !ok {
			errs = append(errs, fmt.Errorf("memberlist: channel %s: %w", ch, ErrUnknownChannel))
			continue
		}
		if !g.viewer.CanView(s.UserID, ch) {
			errs = append(errs, fmt.Errorf("memberlist: channel %s: %w", ch, ErrHiddenChannel))
			continue
		}
		if _, ok := subs[lid]; !ok && len(subs) >= g.cfg.MaxChannels {
			g.evictOldest(s.ID, subs)
		}
		out, err := g.lists[lid].Subscribe(s, channels[ch])
		if err != nil {
			errs = append(errs, err)
		}
		d.Merge(out)
		if subs == nil {
			subs = make(map[string]held)
			g.sessions[s.ID] = subs
		}
		if g.lists[lid].subs[s.ID] == nil {
			delete(subs, lid)
		} else {
			g.seq++
			subs[lid] = held{channel: ch, seq: g.seq}
		}
	}
	return d, errors.Join(errs...)
}

// evictOldest drops a session's least recently subscribed list.
func (g *Guild) evictOldest(id event.SessionID, subs map[string]held) {
	oldest, first := "", true
	for lid, h := range subs {
		if first || h.seq < subs[oldest].seq {
			oldest, first = lid, false
		}
	}
	if first {
		return
	}
	if l := g.lists[oldest]; l != nil {
		l.Unsubscribe(id)
	}
	delete(subs, oldest)
}

// Disconnect drops every subscription of a session.
func (g *Guild) Disconnect(id event.SessionID) {
	for lid := range g.sessions[id] {
		if l := g.lists[lid]; l != nil {
			l.Unsubscribe(id)
		}
	}
	delete(g.sessions, id)
}

// Shows reports whether any subscribed session displays the member's row
// in any list: the test a large guild applies before forwarding a
// PRESENCE_UPDATE outside the member list.
func (g *Guild) Shows(userID snowflake.ID) bool {
	for _, l := range g.lists {
		if l.Shows(userID) {
			return true
		}
	}
	return false
}

// Viewers returns the sessions whose ranges show the member's row in any
// list, each once: the recipients of a large guild's PRESENCE_UPDATE.
func (g *Guild) Viewers(userID snowflake.ID) []event.Session {
	var out []event.Session
	seen := make(map[event.SessionID]bool)
	for _, l := range g.lists {
		for _, s := range l.Viewers(userID) {
			if !seen[s.ID] {
				seen[s.ID] = true
				out = append(out, s)
			}
		}
	}
	return out
}
