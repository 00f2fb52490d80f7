package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Sliced guilds: above Config.SliceThreshold online sessions the owner
// hands its sessions to relays (Deps.Slices), at most Config.SliceSize
// each, and stops deciding per session. It sends each event once per
// relay on one ordered stream that also carries every permission change
// (the engine's journal), each entry stamped with the state version it
// was produced at; each relay keeps a replica and filters its slice
// (runtime/domain/fanout). The owner's cost per event is then one entry per
// relay instead of a permission check per online session.
//
// A change that may move who sees which channel is one Visibility entry
// per relay: each relay keeps its sessions' channel lists and sends the
// CHANNEL_*/THREAD_* events itself (sliceSyncVisibility).
//
// Everything the owner still decides per session (GUILD_CREATE, member
// lists, focused typing, private threads' events) goes
// to the session's relay as a Direct entry on the same stream, so a
// session gets all of its guild's events on one path, in the actor's
// order. Joins, leaves and op 14 focus changes go to the relay that owns
// the session. A relay that fails a send is dropped and its sessions are
// re-homed on the others (an entry in flight to it is lost, as a live
// event may be: history is the truth); with no relay left the owner
// filters every session itself again.

// DefaultSliceThreshold is the default of Config.SliceThreshold and
// Config.SliceSize: 15,000 sessions (the seed's relay size).
const DefaultSliceThreshold = 15000

// Slicer carries a guild owner's streams to relays; fanout.Local is the
// in-process one.
type Slicer interface {
	// Relays lists the relays a guild may hand sessions to.
	Relays(guildID snowflake.ID) []string
	// Send appends an entry to the guild's stream to a relay, in call
	// order. fanout.ErrBehind asks for a snapshot; any other error means
	// the relay is gone.
	Send(ctx context.Context, relay string, e *fanout.Entry) error
}

// actorSliced is a sliced guild's relay state.
type actorSliced struct {
	// owner names this sliced period of this actor on the relays
	// (fanout.Entry.Owner), so a successor's snapshot supersedes it.
	owner   string
	relays  []string
	home    map[event.SessionID]string
	load    map[string]int
	pending []permissions.Change
	version uint64
	// sent is what each relay holds of the channel list (slicevis.go).
	sent map[string]map[snowflake.ID]uint64
}

// sliceCheck enters sliced mode when the guild has more sessions than the
// threshold and relays are available, or leaves it below half of it.
func (a *Actor) sliceCheck(ctx context.Context) {
	sl := a.svc.deps.Slices
	if sl == nil {
		return
	}
	n, th := len(a.subs), a.svc.cfg.SliceThreshold
	switch {
	case a.sliced == nil && n > th:
		a.enterSliced(ctx)
	case a.sliced != nil && n < th/2:
		a.leaveSliced(ctx)
	}
}

func (a *Actor) enterSliced(ctx context.Context) {
	relays := a.svc.deps.Slices.Relays(a.id)
	if len(relays) == 0 {
		return
	}
	size := a.svc.cfg.SliceSize
	need := (len(a.subs) + size - 1) / size
	if need > len(relays) {
		a.svc.log.Warn("fewer relays than the guild's sessions need; slices above their size", "guild_id", a.id, "sessions", len(a.subs), "relays", len(relays), "need", need)
		need = len(relays)
	}
	st := &actorSliced{owner: sliceOwner(a.id), relays: slices.Clone(relays[:need]), home: make(map[event.SessionID]string), load: make(map[string]int)}
	a.sliced = st
	a.engine.SetJournal(func(c permissions.Change) { st.pending = append(st.pending, c) })
	for _, sub := range a.sortedSubs() {
		r := a.leastLoaded()
		st.home[sub.s.ID] = r
		st.load[r]++
	}
	a.svc.log.Info("guild sessions handed to relays", "guild_id", a.id, "sessions", len(a.subs), "relays", st.relays)
	for _, r := range slices.Clone(st.relays) {
		a.sliceSnapshot(ctx, r)
	}
}

// leaveSliced takes the guild's sessions back from its relays, which
// drop their slices.
func (a *Actor) leaveSliced(ctx context.Context) {
	a.releaseSlices(ctx)
	a.refreshVisible()
	a.svc.log.Info("guild sessions taken back from relays", "guild_id", a.id, "sessions", len(a.subs))
}

// releaseSlices ends sliced mode and tells every relay to drop the
// guild's slice: when the owner takes its sessions back, and when the
// actor stops (the guild moved to another guild node, or was deleted),
// so a relay keeps no slice of an owner that is gone. A successor that
// already took a relay's slice over is unaffected (fanout.Entry.Owner).
func (a *Actor) releaseSlices(ctx context.Context) {
	st := a.sliced
	if st == nil {
		return
	}
	a.sliced = nil
	a.engine.SetJournal(nil)
	for _, r := range st.relays {
		_ = a.svc.deps.Slices.Send(ctx, r, &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Drop: true})
	}
}

// sliceOwners numbers the sliced periods of this process's actors.
var sliceOwners atomic.Uint64

// sliceOwner returns a name for a new sliced period of guild: unique
// across processes (a random process part) and within one (a counter).
func sliceOwner(guild snowflake.ID) string {
	return fmt.Sprintf("%d/%s/%d", guild, processTag, sliceOwners.Add(1))
}

// processTag tells this process's slice owners from other guild nodes'.
var processTag = strconv.FormatUint(rand.Uint64(), 36)

// leastLoaded is the relay with the fewest sessions, the first in list
// order on ties.
func (a *Actor) leastLoaded() string {
	st := a.sliced
	best := ""
	for _, r := range st.relays {
		if best == "" || st.load[r] < st.load[best] {
			best = r
		}
	}
	return best
}

// slot is a session as handed to a relay.
func (a *Actor) slot(s event.Session) fanout.Slot {
	out := fanout.Slot{Session: s}
	if m, ok := a.members[s.UserID]; ok {
		em := engineMember(*m)
		em.Roles = slices.Clone(em.Roles)
		out.Member = &em
	}
	if a.passive != nil {
		if set, ok := a.passive.active[s.ID]; ok {
			out.HasActive = true
			for ch := range set {
				out.Active = append(out.Active, ch)
			}
			slices.SortFunc(out.Active, cmpID)
		}
	}
	return out
}

// threadPlace tells a relay that a channel is a thread of its parent.
func threadPlace(c *store.Channel) fanout.Channel {
	return fanout.Channel{ID: c.ID, Parent: c.ParentID, Thread: true}
}

// sliceSnapshot sends a relay the guild's whole permission state and the
// sessions it owns, at the current version.
func (a *Actor) sliceSnapshot(ctx context.Context, relay string) {
	st := a.sliced
	a.flushPending(ctx)
	if a.sliced != st || !slices.Contains(st.relays, relay) {
		return
	}
	e := &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Reset: true, Members: len(a.members)}
	e.Changes = append(e.Changes, permissions.Change{Op: permissions.OpOwner, ID: a.guild.OwnerID})
	for id, r := range a.roles {
		e.Changes = append(e.Changes, permissions.Change{Op: permissions.OpRole, ID: id, Bits: permissions.Bits(r.Permissions)})
	}
	for id, c := range a.channels {
		e.Changes = append(e.Changes, permissions.Change{Op: permissions.OpOverwrites, ID: id, Overwrites: engineOverwrites(c.Overwrites)})
	}
	e.Visibility = a.sliceVisibility(nil, nil, 0)
	st.visSent(relay, e.Visibility)
	for _, sub := range a.sortedSubs() {
		if st.home[sub.s.ID] == relay {
			e.Add = append(e.Add, a.slot(sub.s))
		}
	}
	a.sliceSend(ctx, relay, e)
}

// flushPending sends the permission changes journaled since the last
// entry to every relay, as the next state version.
func (a *Actor) flushPending(ctx context.Context) {
	st := a.sliced
	if st == nil || len(st.pending) == 0 {
		return
	}
	st.version++
	e := &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Changes: st.pending}
	st.pending = nil
	for _, r := range slices.Clone(st.relays) {
		a.sliceSend(ctx, r, e)
	}
}

// sliceSend sends one entry to a relay: a relay that is behind gets a
// snapshot, one that failed loses its sessions to the others.
func (a *Actor) sliceSend(ctx context.Context, relay string, e *fanout.Entry) {
	err := a.svc.deps.Slices.Send(ctx, relay, e)
	switch {
	case err == nil:
		a.svc.metrics.sliceEntries.Inc()
	case errors.Is(err, fanout.ErrBehind) && !e.Reset:
		a.svc.log.Info("relay behind; sending a snapshot", "guild_id", a.id, "relay", relay, "err", err)
		a.sliceSnapshot(ctx, relay)
	default:
		a.relayDown(ctx, relay, err)
	}
}

// relayDown re-homes a failed relay's sessions on the others, taking more
// of the tier's relays when the rest would exceed SliceSize.
func (a *Actor) relayDown(ctx context.Context, relay string, cause error) {
	st := a.sliced
	if st == nil || !slices.Contains(st.relays, relay) {
		return
	}
	st.relays = slices.DeleteFunc(st.relays, func(r string) bool { return r == relay })
	delete(st.load, relay)
	var moved []*subscriber
	for _, sub := range a.sortedSubs() {
		if st.home[sub.s.ID] == relay {
			moved = append(moved, sub)
		}
	}
	size := a.svc.cfg.SliceSize
	for _, r := range a.svc.deps.Slices.Relays(a.id) {
		if (len(a.subs)+size-1)/size <= len(st.relays) {
			break
		}
		if r != relay && !slices.Contains(st.relays, r) {
			st.relays = append(st.relays, r)
			a.sliceSnapshot(ctx, r)
		}
	}
	a.svc.log.Warn("relay failed; re-homing its sessions", "guild_id", a.id, "relay", relay, "sessions", len(moved), "relays", st.relays, "err", cause)
	if len(st.relays) == 0 {
		a.sliced = nil
		a.engine.SetJournal(nil)
		a.refreshVisible()
		a.svc.log.Warn("no relay left; the owner filters every session", "guild_id", a.id)
		return
	}
	a.flushPending(ctx)
	adds := make(map[string]*fanout.Entry)
	for _, sub := range moved {
		r := a.leastLoaded()
		st.home[sub.s.ID] = r
		st.load[r]++
		e := adds[r]
		if e == nil {
			e = &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version}
			adds[r] = e
		}
		e.Add = append(e.Add, a.slot(sub.s))
	}
	a.svc.metrics.sliceRehomed.Add(float64(len(moved)))
	for _, r := range slices.Sorted(mapKeys(adds)) {
		a.sliceSend(ctx, r, adds[r])
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sliceAdd hands a new subscriber to the least-loaded relay, taking one
// more of the tier's relays when every slice is full.
func (a *Actor) sliceAdd(ctx context.Context, s event.Session) {
	st := a.sliced
	r := a.leastLoaded()
	if st.load[r] >= a.svc.cfg.SliceSize {
		for _, c := range a.svc.deps.Slices.Relays(a.id) {
			if !slices.Contains(st.relays, c) {
				st.relays = append(st.relays, c)
				a.sliceSnapshot(ctx, c)
				r = c
				break
			}
		}
	}
	st.home[s.ID] = r
	st.load[r]++
	a.flushPending(ctx)
	a.sliceSend(ctx, r, &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Add: []fanout.Slot{a.slot(s)}})
}

// sliceRemove tells a session's relay it left.
func (a *Actor) sliceRemove(ctx context.Context, id event.SessionID) {
	st := a.sliced
	r, ok := st.home[id]
	if !ok {
		return
	}
	delete(st.home, id)
	st.load[r]--
	a.flushPending(ctx)
	a.sliceSend(ctx, r, &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Remove: []event.SessionID{id}})
}

// sliceVisibility is syncVisibility's work for the relays: the guild's
// channels as a slice decides and announces them, with the change's
// deleted and updated channels; onlyUser limits thread member objects to
// that user's. Its cost grows with the guild's channels and thread
// members, not with its online sessions.
func (a *Actor) sliceVisibility(updated map[snowflake.ID]bool, deleted map[snowflake.ID]store.Channel, onlyUser snowflake.ID) *fanout.Visibility {
	all := make([]store.Channel, 0, len(a.channels)+len(deleted))
	for _, c := range a.channels {
		all = append(all, *c)
	}
	for id, c := range deleted {
		if _, ok := a.channels[id]; !ok {
			all = append(all, c)
		}
	}
	slices.SortFunc(all, compareChannels)
	v := &fanout.Visibility{User: onlyUser}
	for _, c := range all {
		vc := fanout.VisibleChannel{ID: c.ID, Position: c.Position, Payload: mustJSON(wire.ChannelFrom(c, nil))}
		if c.Thread != nil {
			vc.Thread, vc.Parent, vc.Archived = true, c.ParentID, c.Thread.Archived
			if c.ID == a.newThread {
				wc := wire.ChannelFrom(c, nil)
				wc.NewlyCreated = true
				vc.Created = mustJSON(wc)
			}
			if c.Type == store.ChannelPrivateThread {
				vc.Private = true
				for u := range a.threadMembers[c.ID] {
					vc.Members = append(vc.Members, u)
				}
				slices.SortFunc(vc.Members, cmpID)
			}
			for u, m := range a.threadMembers[c.ID] {
				if onlyUser != 0 && u != onlyUser {
					continue
				}
				if vc.ThreadMembers == nil {
					vc.ThreadMembers = make(map[snowflake.ID]json.RawMessage)
				}
				vc.ThreadMembers[u] = mustJSON(wire.ThreadMemberFrom(m))
			}
		}
		if _, ok := a.channels[c.ID]; ok {
			v.Channels = append(v.Channels, vc)
		} else {
			v.Deleted = append(v.Deleted, vc)
		}
	}
	for id := range updated {
		v.Updated = append(v.Updated, id)
	}
	slices.SortFunc(v.Updated, cmpID)
	return v
}

// sliceSyncVisibility is syncVisibility for a sliced guild: one entry per
// relay (per relay owning one of onlyUser's sessions, when set) instead
// of a channel-list diff per online session at the owner.
func (a *Actor) sliceSyncVisibility(ctx context.Context, updated map[snowflake.ID]bool, deleted map[snowflake.ID]store.Channel, onlyUser snowflake.ID) {
	st := a.sliced
	a.flushPending(ctx)
	relays := slices.Clone(st.relays)
	if onlyUser != 0 {
		relays = relays[:0]
		for _, sess := range a.svc.localUserSessions(onlyUser) {
			if r, ok := st.home[sess.ID]; ok && !slices.Contains(relays, r) {
				relays = append(relays, r)
			}
		}
		slices.Sort(relays)
	}
	if len(relays) == 0 {
		return
	}
	for i, e := range a.visibilityEntries(relays, a.sliceVisibility(updated, deleted, onlyUser)) {
		a.sliceSend(ctx, relays[i], e)
	}
}

// refreshVisible sets every subscriber's channel list to what it sees
// now, when the owner takes over from relays that kept them.
func (a *Actor) refreshVisible() {
	perUser := make(map[snowflake.ID]map[snowflake.ID]bool)
	for _, sub := range a.sortedSubs() {
		now, ok := perUser[sub.s.UserID]
		if !ok {
			now = a.visibleChannels(sub.s.UserID)
			perUser[sub.s.UserID] = now
		}
		sub.visible = now
	}
}

// sliceMoved tells a session's relay, after the move marker, that the
// session's events go to another gateway node now (MoveSession); the
// slot it sends again keeps the session's active channels.
func (a *Actor) sliceMoved(ctx context.Context, s event.Session) {
	st := a.sliced
	if st == nil {
		return
	}
	r, ok := st.home[s.ID]
	if !ok {
		return
	}
	a.flushPending(ctx)
	a.sliceSend(ctx, r, &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Add: []fanout.Slot{a.slot(s)}})
}

// sliceActive tells a session's relay its new active channels.
func (a *Actor) sliceActive(ctx context.Context, s event.Session, set map[snowflake.ID]bool) {
	st := a.sliced
	r, ok := st.home[s.ID]
	if !ok {
		return
	}
	chans := make([]snowflake.ID, 0, len(set))
	for ch := range set {
		chans = append(chans, ch)
	}
	slices.SortFunc(chans, cmpID)
	a.flushPending(ctx)
	a.sliceSend(ctx, r, &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Active: &fanout.Active{Session: s.ID, Channels: chans}})
}

// sliceEvent sends an event once per relay. place, when set, tells the
// relays which thread the event's channel is.
func (a *Actor) sliceEvent(ctx context.Context, ev *fanout.Event) {
	st := a.sliced
	a.flushPending(ctx)
	e := &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Members: len(a.members), Event: ev}
	if c := a.channels[ev.Channel]; c != nil && c.Thread != nil {
		e.Channels = []fanout.Channel{threadPlace(c)}
	}
	a.svc.metrics.sliceEvents.Inc()
	for _, r := range slices.Clone(st.relays) {
		a.sliceSend(ctx, r, e)
	}
}

// sliceDirect sends an owner-decided batch to the relays owning its
// targets; targets no relay owns are delivered directly.
func (b *batcher) sliceDirect(ctx context.Context, a *Actor) {
	st := a.sliced
	a.flushPending(ctx)
	per := make(map[string]map[string][]event.Target)
	direct := newBatcher(b.typ, b.payloads...)
	for node, ts := range b.byNode {
		for _, t := range ts {
			r, ok := st.home[t.Session]
			if !ok {
				direct.byNode[node] = append(direct.byNode[node], t)
				continue
			}
			if per[r] == nil {
				per[r] = make(map[string][]event.Target)
			}
			per[r][node] = append(per[r][node], t)
		}
	}
	for _, r := range slices.Sorted(mapKeys(per)) {
		a.sliceSend(ctx, r, &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Direct: &fanout.Direct{Type: b.typ, Payloads: b.payloads, Targets: per[r]}})
	}
	if len(direct.byNode) > 0 {
		direct.flush(ctx, a.svc)
	}
}

// slicedChannel reports whether a channel's events go to the relays to
// filter: not a private thread, whose membership only the owner knows.
func (a *Actor) slicedChannel(channelID snowflake.ID) bool {
	if a.sliced == nil {
		return false
	}
	c := a.channels[channelID]
	return c == nil || c.Type != store.ChannelPrivateThread
}

// sliceMessage is fanoutMessage for a sliced guild: the message with its
// content-stripped variant and the facts a relay decides on.
func (a *Actor) sliceMessage(ctx context.Context, typ string, m wire.Message, full json.RawMessage) {
	ev := &fanout.Event{
		Type:            typ,
		Payloads:        []json.RawMessage{full, mustJSON(wire.StripContent(m))},
		Kind:            fanout.KindMessage,
		Intent:          IntentGuildMessages,
		Channel:         m.ChannelID,
		Create:          typ == "MESSAGE_CREATE",
		MessageID:       m.ID,
		Author:          m.Author.ID,
		MentionRoles:    m.MentionRoles,
		MentionEveryone: m.MentionEveryone,
	}
	for _, u := range m.Mentions {
		ev.MentionUsers = append(ev.MentionUsers, u.ID)
	}
	a.sliceEvent(ctx, ev)
}
