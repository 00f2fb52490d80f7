package guild

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/shed"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/domain/typing"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// PresenceSource answers a user's presence as the presence role sees it
// now. An actor reads it once when it starts tracking presence, for every
// member; later changes arrive through PresenceChanged.
type PresenceSource interface {
	Get(userID snowflake.ID) presence.Presence
}

// PresenceConfig wires presence, member lists, typing focus and load
// shedding into a Service's actors (EnablePresence).
type PresenceConfig struct {
	// Source seeds an actor's presences. Required.
	Source PresenceSource
	// Tracker holds sessions' channel focus and throttles typing. Nil:
	// TYPING_START goes to every session that sees the channel.
	Tracker *typing.Tracker
	// Shedder decides what to drop under pressure. Required.
	Shedder *shed.Shedder
	// Audience picks PRESENCE_UPDATE recipients by guild size; its zero
	// LargeThreshold takes the Service's LargeThreshold.
	Audience presence.Audience
	// Lists configures each guild's member lists; ShowOffline is set per
	// guild (guilds up to LargeThreshold members list offline members).
	Lists memberlist.GuildConfig
}

// EnablePresence turns on presence tracking, member lists (op 14), op 8
// and focused typing. Call it once, before sessions subscribe.
func (s *Service) EnablePresence(cfg PresenceConfig) {
	if cfg.Audience.LargeThreshold <= 0 {
		cfg.Audience.LargeThreshold = s.cfg.LargeThreshold
	}
	s.presence.Store(&cfg)
}

// actorPresence is an actor's presence state: the known presence of every
// member that is not offline, and the guild's member lists.
type actorPresence struct {
	cfg     *PresenceConfig
	known   map[snowflake.ID]presence.Presence
	lists   *memberlist.Guild
	hoisted []memberlist.Role
	// subscribed holds, per session that sent op 14 with channels, the
	// ranges it asked for per visible channel.
	subscribed map[event.SessionID]map[snowflake.ID][]memberlist.Range
}

// presenceState returns the actor's presence state, building it on first
// use from the store-loaded state and the presence source; nil when
// presence is not enabled.
func (a *Actor) presenceState(ctx context.Context) *actorPresence {
	if a.pres != nil {
		return a.pres
	}
	cfg := a.svc.presence.Load()
	if cfg == nil {
		return nil
	}
	ap := &actorPresence{cfg: cfg, known: make(map[snowflake.ID]presence.Presence), subscribed: make(map[event.SessionID]map[snowflake.ID][]memberlist.Range)}
	lc := cfg.Lists
	lc.List.ShowOffline = len(a.members) <= cfg.Audience.LargeThreshold
	ap.hoisted = a.hoistedRoles()
	ap.lists = memberlist.NewGuild(a.id, memberlist.ViewerFunc(a.canView), ap.hoisted, lc)
	ap.lists.SetMemberCount(len(a.members))
	for id, m := range a.members {
		p := cfg.Source.Get(id)
		if p.Status != presence.Offline {
			ap.known[id] = p
		}
		if p.Status != presence.Offline || lc.List.ShowOffline {
			ap.lists.Upsert(a.listMember(ctx, *m, p))
		}
	}
	for id, c := range a.channels {
		if listed(c) {
			ap.lists.SetChannel(id, channelList(c))
		}
	}
	a.pres = ap
	return ap
}

// listed reports whether a channel has a member list.
func listed(c *store.Channel) bool { return c.Type != store.ChannelCategory }

func channelList(c *store.Channel) string {
	return memberlist.GroupKey(memberlist.ViewOverwrites(c.Overwrites))
}

// hoistedRoles returns the hoisted roles for the member lists.
func (a *Actor) hoistedRoles() []memberlist.Role {
	var out []memberlist.Role
	for _, r := range a.sortedRoles() {
		if r.Hoist && r.ID != a.id {
			out = append(out, memberlist.Role{ID: r.ID, Position: r.Position})
		}
	}
	return out
}

// presenceOf returns a member's known presence (offline when unknown).
func (ap *actorPresence) presenceOf(id snowflake.ID) presence.Presence {
	if p, ok := ap.known[id]; ok {
		return p
	}
	return presence.OfflinePresence()
}

// listMember builds a member's list row.
func (a *Actor) listMember(ctx context.Context, m store.Member, p presence.Presence) memberlist.Member {
	wm := a.wireMember(ctx, m)
	name := ""
	if u := wm.User; u != nil {
		gn := ""
		if u.GlobalName != nil {
			gn = *u.GlobalName
		}
		name = memberlist.DisplayName(m.Nick, gn, u.Username)
	}
	return memberlist.Member{
		UserID: m.UserID,
		Name:   name,
		Roles:  slices.Clone(m.Roles),
		Status: string(p.Status),
		Data:   memberlist.WithPresence(mustJSON(wm), p.Event(m.UserID, 0)),
	}
}

// pressure is the actor's load for an operation enqueued at enq.
func (a *Actor) pressure(enq time.Time) shed.Pressure {
	return shed.Pressure{Age: time.Since(enq), Queue: len(a.mailbox)}
}

// deliverLists hands member-list operations to the sink unless shed.
func (a *Actor) deliverLists(ctx context.Context, ap *actorPresence, d memberlist.Dispatch, pr shed.Pressure) {
	batches := d.Batches()
	nodes := make([]string, 0, len(batches))
	for n := range batches {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		b := batches[n]
		if !ap.cfg.Shedder.Admit(shed.MemberList, pr, len(b.Targets)) {
			continue
		}
		a.svc.metrics.deliveries.Add(float64(len(b.Targets)))
		a.svc.deps.Sink.Deliver(ctx, n, b)
	}
}

// PresenceChanged is the presence role's Router target: it sends
// PRESENCE_UPDATE (without guild_id) to the sessions of the user's
// friends and hands the presence to each of the user's guilds loaded in
// this process, which decide who sees it. It never blocks on a full
// mailbox: that guild's update is shed.
func (s *Service) PresenceChanged(ctx context.Context, userID snowflake.ID, p presence.Presence, friends []snowflake.ID) {
	cfg := s.presence.Load()
	if cfg == nil {
		return
	}
	if len(friends) > 0 {
		b := newBatcher("PRESENCE_UPDATE", p.Event(userID, 0))
		for _, list := range s.usersSessions(ctx, friends) {
			for _, sess := range list {
				b.add(sess, 0)
			}
		}
		b.flush(ctx, s)
	}
	guilds, err := s.deps.Store.UserGuilds(ctx, userID)
	if err != nil {
		s.log.Warn("presence: user guilds", "user_id", userID, "err", err)
		return
	}
	// A cancelled context makes post try the mailbox once.
	once, cancel := context.WithCancel(context.Background())
	cancel()
	enq := time.Now()
	for _, g := range guilds {
		s.mu.Lock()
		_, loaded := s.actors[g]
		s.mu.Unlock()
		if !loaded {
			continue // nobody watches a guild that is not loaded
		}
		if err := s.post(once, g, func(a *Actor) {
			a.presenceChanged(context.Background(), userID, p, enq)
		}); err != nil {
			// Count the drop as shed presence: Admit at unbounded pressure.
			cfg.Shedder.Admit(shed.Presence, shed.Pressure{Age: math.MaxInt64}, 1)
		}
	}
}

// presenceChanged applies a member's new presence: the member lists
// first (the rows the member's change touches), then PRESENCE_UPDATE to
// the audience the guild's size allows.
func (a *Actor) presenceChanged(ctx context.Context, userID snowflake.ID, p presence.Presence, enq time.Time) {
	ap := a.presenceState(ctx)
	if ap == nil {
		return
	}
	m, ok := a.members[userID]
	if !ok || ap.presenceOf(userID).Equal(p) {
		return
	}
	if p.Status == presence.Offline {
		delete(ap.known, userID)
	} else {
		ap.known[userID] = p
	}
	pr := a.pressure(enq)
	a.deliverLists(ctx, ap, ap.lists.Upsert(a.listMember(ctx, *m, p)), pr)

	var users, bots []event.Session
	for _, sub := range a.sortedSubs() {
		if sub.s.Bot {
			bots = append(bots, sub.s)
		} else {
			users = append(users, sub.s)
		}
	}
	viewers := ap.lists.Viewers(userID)
	shown := make(map[event.SessionID]bool, len(viewers))
	for _, v := range viewers {
		shown[v.ID] = true
	}
	var inRange, outside []event.Session
	for _, r := range ap.cfg.Audience.Select(len(a.members), users, bots, viewers) {
		if shown[r.ID] {
			inRange = append(inRange, r)
		} else {
			outside = append(outside, r)
		}
	}
	b := newBatcher("PRESENCE_UPDATE", p.Event(userID, a.id))
	if len(inRange) > 0 && ap.cfg.Shedder.Admit(shed.MemberList, pr, len(inRange)) {
		for _, r := range inRange {
			b.add(r, 0)
		}
	}
	if len(outside) > 0 && ap.cfg.Shedder.Admit(shed.Presence, pr, len(outside)) {
		for _, r := range outside {
			b.add(r, 0)
		}
	}
	b.flushGuild(ctx, a)
}

// withPresences fills GUILD_CREATE's `presences` for a session: the known
// presences of the members it carries (every member in small guilds, the
// session's own in large ones), none for bots without GUILD_PRESENCES.
func (a *Actor) withPresences(ctx context.Context, s event.Session, gc wire.GuildCreate) wire.GuildCreate {
	ap := a.presenceState(ctx)
	if ap == nil || (s.Bot && s.Intents&presence.IntentGuildPresences == 0) {
		return gc
	}
	for _, m := range gc.Members {
		if m.User == nil {
			continue
		}
		if p, ok := ap.known[m.User.ID]; ok {
			gc.Presences = append(gc.Presences, p.Event(m.User.ID, 0))
		}
	}
	return gc
}

// subRemoved runs after a session left the actor: its list subscriptions
// go, and when it was its user's last session here the member is shown
// offline at once, so a presence role that restarted without hearing of
// the disconnect leaves no stale row.
func (a *Actor) subRemoved(ctx context.Context, sub *subscriber) {
	if a.pres == nil || sub == nil {
		return
	}
	a.pres.lists.Disconnect(sub.s.ID)
	delete(a.pres.subscribed, sub.s.ID)
	for _, o := range a.subs {
		if o.s.UserID == sub.s.UserID {
			return
		}
	}
	a.presenceChanged(ctx, sub.s.UserID, presence.OfflinePresence(), time.Now())
}
