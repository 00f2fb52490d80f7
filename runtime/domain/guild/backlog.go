package guild

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/typing"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// The move backlog closes the gap a guild move opens. When the ring moves
// a guild, the new owner's actor serves writes as soon as the api nodes'
// rings name it, while each gateway resubscribes the guild's sessions on
// it one call at a time. An event the new actor fans out before a
// session's subscription arrives would never reach that session. So an
// actor records what it fans out from the moment it loads, and a session
// the gateway subscribes again because the guild moved
// (AttachMovedSession) is first given the recorded events it would have
// received, decided by the same rules as live fan-out, then live events.
//
// The session got every event of the old owner's actor until that actor
// unloaded (Unload runs after the operations already queued), and none of
// this actor's until now, so the replay neither repeats nor skips one of
// this actor's events. What it cannot give back is an event of a third
// actor the session never was attached to, such as an owner between two
// moves it did not reach in time, or one the old owner had not delivered
// when it stopped or died; for the latter the gateway asks for a refresh
// and the session gets GUILD_CREATE before the replay.
//
// Recording is bounded: it stops, and the backlog is freed, once
// moveBacklogWindow has passed since the load or moveBacklogMax events
// were recorded. A session that arrives after that cannot be replayed to
// and gets a fresh GUILD_CREATE, as every resubscription did before.
var (
	// moveBacklogWindow is how long after loading an actor records.
	// Gateways resubscribe a moved guild's sessions within seconds; a
	// minute leaves room for a slow or retried subscribe.
	moveBacklogWindow = time.Minute
	// moveBacklogMax bounds the recorded events: a few seconds of a busy
	// guild's stream. Payloads are shared with the live dispatches, so
	// an entry costs little beyond what the live batch already built.
	moveBacklogMax = 4096
)

// backlogKind is the fan-out rule an entry is decided by again.
type backlogKind uint8

const (
	// backlogGuild is broadcast: sessions with the intent.
	backlogGuild backlogKind = iota
	// backlogChannel is broadcastChannel: sessions with the intent that
	// see the channel; content events skip sessions passive in it.
	backlogChannel
	// backlogMessage is fanoutMessage.
	backlogMessage
	// backlogHolders is toHolders: GUILD_MODERATION sessions whose user
	// holds perms.
	backlogHolders
)

// backlogEntry is one recorded event with what its rule needs.
type backlogEntry struct {
	seq      uint64
	kind     backlogKind
	typ      string
	payload  json.RawMessage
	intent   uint64
	channel  snowflake.ID
	content  bool
	msg      *wire.Message
	perms    permissions.Bits
	botsOnly bool
}

// span is a range of entry sequence numbers [from, to) during which a
// session was a subscriber of the actor (to is open while it still is).
type span struct{ from, to uint64 }

const openSpan = ^uint64(0)

// moveBacklog is an actor's record since load.
type moveBacklog struct {
	since   time.Time
	next    uint64
	entries []backlogEntry
	// opaque is set once the actor dispatched a state change no entry
	// replays (channel visibility, voice states, thread members...): a
	// session replayed to then needs GUILD_CREATE to see the guild as it
	// is.
	opaque bool
	// attached holds, per session that was a subscriber of this actor
	// since load, the spans it received live events for.
	attached map[event.SessionID][]span
}

// lossyTypes are dispatches a backlog neither records nor counts as
// opaque: ephemeral (typing), shed under load by design (presences,
// member lists), or answers to one session (chunks, GUILD_CREATE, its
// own GUILD_DELETE, voice server) that another session has no part in.
var lossyTypes = map[string]bool{
	typing.DispatchType:          true,
	"PRESENCE_UPDATE":            true,
	memberlist.DispatchType:      true,
	memberlist.ChunkDispatchType: true,
	"GUILD_CREATE":               true,
	"GUILD_DELETE":               true,
	"VOICE_SERVER_UPDATE":        true,
	event.MoveMarker:             true,
	"THREAD_LIST_SYNC":           true, // follows a visibility change, which is opaque
}

// startBacklog begins recording; load calls it.
func (a *Actor) startBacklog() {
	if moveBacklogWindow <= 0 || moveBacklogMax <= 0 {
		return
	}
	a.backlog = &moveBacklog{since: time.Now(), attached: make(map[event.SessionID][]span)}
}

// liveBacklog returns the backlog while it still holds every event since
// load, freeing it once a bound is passed.
func (a *Actor) liveBacklog() *moveBacklog {
	bl := a.backlog
	if bl == nil {
		return nil
	}
	if len(bl.entries) >= moveBacklogMax || time.Since(bl.since) > moveBacklogWindow {
		a.backlog = nil
		return nil
	}
	return bl
}

// record adds one fanned-out event to the backlog.
func (a *Actor) record(e backlogEntry) {
	bl := a.liveBacklog()
	if bl == nil {
		return
	}
	e.seq = bl.next
	bl.next++
	bl.entries = append(bl.entries, e)
}

// noteOpaque marks the backlog opaque for a dispatch of typ it does not
// replay.
func (a *Actor) noteOpaque(typ string) {
	if lossyTypes[typ] {
		return
	}
	if bl := a.liveBacklog(); bl != nil {
		bl.opaque = true
	}
}

// backlogAttached and backlogDetached track a session's spans.
func (a *Actor) backlogAttached(id event.SessionID) {
	bl := a.liveBacklog()
	if bl == nil {
		return
	}
	ss := bl.attached[id]
	if n := len(ss); n > 0 && ss[n-1].to == openSpan {
		return
	}
	bl.attached[id] = append(ss, span{from: bl.next, to: openSpan})
}

func (a *Actor) backlogDetached(id event.SessionID) {
	bl := a.liveBacklog()
	if bl == nil {
		return
	}
	if ss := bl.attached[id]; len(ss) > 0 && ss[len(ss)-1].to == openSpan {
		ss[len(ss)-1].to = bl.next
	}
}

// received reports whether a session got entry seq live.
func (bl *moveBacklog) received(id event.SessionID, seq uint64) bool {
	for _, s := range bl.attached[id] {
		if seq >= s.from && seq < s.to {
			return true
		}
	}
	return false
}

// replayVariant decides entry e for session s by e's fan-out rule with the
// guild as it is now, returning the payload to send, if any; passive is
// set when s is left out only because it is passive in the channel (live,
// it would have learnt of the channel's activity from PASSIVE_UPDATE_V1).
func (a *Actor) replayVariant(e *backlogEntry, s event.Session) (payload json.RawMessage, ok, passive bool) {
	switch e.kind {
	case backlogGuild:
		return e.payload, wants(s, e.intent), false
	case backlogChannel:
		if !wants(s, e.intent) || !a.canView(s.UserID, e.channel) {
			return nil, false, false
		}
		if e.content && a.passiveSkips(s, e.channel) {
			return nil, false, true
		}
		return e.payload, true, false
	case backlogMessage:
		m := e.msg
		if !wants(s, IntentGuildMessages) || !a.canView(s.UserID, m.ChannelID) {
			return nil, false, false
		}
		if a.passiveSkips(s, m.ChannelID) && (e.typ != "MESSAGE_CREATE" || !a.mentionsSession(*m, s)) {
			return nil, false, true
		}
		if s.Bot && s.Intents&IntentMessageContent == 0 && m.Author.ID != s.UserID && !mentions(*m, s.UserID) {
			return mustJSON(wire.StripContent(*m)), true, false
		}
		return e.payload, true, false
	case backlogHolders:
		ok := (s.Bot || !e.botsOnly) && wants(s, IntentGuildModeration) && a.engine.Base(s.UserID, a.svc.cfg.Now()).Has(e.perms)
		return e.payload, ok, false
	}
	return nil, false, false
}

// Outcomes of AttachMovedSession, the label of its metric.
const (
	moveReplayed  = "replayed"  // the backlog's events, no GUILD_CREATE
	moveRefreshed = "refreshed" // GUILD_CREATE, then the backlog's events
	moveExpired   = "expired"   // no backlog left: GUILD_CREATE only
	moveAttached  = "attached"  // already a subscriber: nothing sent
)

// attachMoved is the actor's part of AttachMovedSession: it adds s as a
// subscriber and sends it the backlog's events it has not received, in
// their order, before any live event, with GUILD_CREATE first when the
// backlog cannot bring the session's view of the guild up to date.
func (a *Actor) attachMoved(ctx context.Context, s event.Session, refresh bool) string {
	if _, ok := a.subs[s.ID]; ok {
		// Attached to this actor already (a retried call, or the ring
		// moved the guild back before this node unloaded it): it has
		// had every event since.
		return moveAttached
	}
	bl := a.liveBacklog()
	a.addSub(&subscriber{s: s, visible: a.visibleChannels(s.UserID)})
	if bl == nil {
		a.sendTo(ctx, s, "GUILD_CREATE", a.withPresences(ctx, s, a.guildCreate(ctx, s.UserID)))
		return moveExpired
	}
	// Decide every entry first: GUILD_CREATE, when needed, goes before
	// the replayed events, whose channels it may be the first to show.
	type replayed struct {
		typ     string
		payload json.RawMessage
	}
	var out []replayed
	refresh = refresh || bl.opaque
	for i := range bl.entries {
		e := &bl.entries[i]
		if bl.received(s.ID, e.seq) {
			continue
		}
		payload, ok, passive := a.replayVariant(e, s)
		refresh = refresh || passive
		if ok {
			out = append(out, replayed{e.typ, payload})
		}
	}
	outcome := moveReplayed
	if refresh {
		a.sendTo(ctx, s, "GUILD_CREATE", a.withPresences(ctx, s, a.guildCreate(ctx, s.UserID)))
		outcome = moveRefreshed
	}
	for _, r := range out {
		b := newBatcher(r.typ, r.payload)
		b.replayable = true
		b.add(s, 0)
		b.flushGuild(ctx, a)
	}
	n := len(out)
	a.svc.metrics.moveReplayedEvents.Add(float64(n))
	return outcome
}

// AttachMovedSession is AttachSession for a session the gateway subscribes
// again because the ring moved the guild off the owner it was subscribed
// on (GuildNode.Subscribe with moved). Instead of a fresh GUILD_CREATE,
// the session gets the events this node's actor dispatched since it
// loaded the guild that the session would have received, in order, then
// the live events (see the move backlog above). A session already
// attached here gets nothing new. With refresh (the owner it was
// subscribed on left the cluster, so events it had not delivered may be
// lost) it gets a fresh GUILD_CREATE before the replayed events.
func (s *Service) AttachMovedSession(ctx context.Context, guildID snowflake.ID, sess event.Session, refresh bool) error {
	s.register(sess, guildID)
	var outcome string
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, ok := a.members[sess.UserID]; !ok {
			a.removeSub(sess.ID)
			return fmt.Errorf("attach %s: %w", sess.ID, ErrMissingAccess)
		}
		if !a.svc.attached(sess.ID, a.id) {
			return nil // a DetachSession overtook us
		}
		outcome = a.attachMoved(ctx, sess, refresh)
		return nil
	})
	if err != nil {
		s.forgetSession(sess.ID, guildID)
		return fmt.Errorf("guild %d: %w", guildID, err)
	}
	if outcome != "" {
		s.metrics.moveAttaches.WithLabelValues(outcome).Inc()
	}
	if outcome == moveExpired {
		// Debug: a gateway that reconnects a whole guild late would log
		// one line per session; the metric counts them.
		s.log.Debug("moved session attached after the move backlog ended: events since this node loaded the guild may be missing for it",
			"session_id", sess.ID, "guild_id", guildID)
	}
	return nil
}

// register records that sess is attached to guildID on this service.
func (s *Service) register(sess event.Session, guildID snowflake.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sessions[sess.ID]
	if e == nil {
		e = &sessionEntry{s: sess, guilds: make(map[snowflake.ID]bool)}
		s.sessions[sess.ID] = e
		if s.users[sess.UserID] == nil {
			s.users[sess.UserID] = make(map[event.SessionID]*sessionEntry)
		}
		s.users[sess.UserID][sess.ID] = e
	}
	e.guilds[guildID] = true
}
