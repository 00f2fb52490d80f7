package guild

import (
	"context"
	"encoding/json"
	"slices"

	"go.opentelemetry.io/otel/attribute"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Gateway intent bits used for filtering.
const (
	IntentGuilds              uint64 = 1 << 0
	IntentGuildMembers        uint64 = 1 << 1
	IntentGuildMessages       uint64 = 1 << 9
	IntentGuildMessageTyping  uint64 = 1 << 11
	IntentDirectMessages      uint64 = 1 << 12
	IntentDirectMessageTyping uint64 = 1 << 14
	IntentMessageContent      uint64 = 1 << 15
	intentsPrivileged                = IntentGuildMembers | 1<<8 | IntentMessageContent
	intentsDefined            uint64 = 1<<17 - 1 | 1<<20 | 1<<21 | 1<<24 | 1<<25
)

// wants reports whether a session receives events gated by intent. Intents
// apply to bots; user accounts get everything their permissions allow.
func wants(s event.Session, intent uint64) bool {
	return !s.Bot || s.Intents&intent != 0
}

// batcher groups targets by gateway node for one dispatch.
type batcher struct {
	typ      string
	payloads []json.RawMessage
	byNode   map[string][]event.Target
	// replayable is set on the batches of events the move backlog
	// records (or replays); any other batch of a guild marks the backlog
	// opaque (backlog.go).
	replayable bool
}

func newBatcher(typ string, payloads ...json.RawMessage) *batcher {
	return &batcher{typ: typ, payloads: payloads, byNode: make(map[string][]event.Target)}
}

func (b *batcher) add(s event.Session, variant int) {
	b.byNode[s.Node] = append(b.byNode[s.Node], event.Target{Session: s.ID, Variant: variant})
}

// flush hands one batch per node to the sink, nodes in name order.
func (b *batcher) flush(ctx context.Context, svc *Service) {
	nodes := make([]string, 0, len(b.byNode))
	for n := range b.byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	b.deliver(ctx, svc, nodes)
}

func (b *batcher) deliver(ctx context.Context, svc *Service, nodes []string) {
	for _, n := range nodes {
		ts := b.byNode[n]
		svc.metrics.deliveries.Add(float64(len(ts)))
		svc.deps.Sink.Deliver(ctx, n, event.Batch{Type: b.typ, Payloads: b.payloads, Targets: ts})
	}
}

// flushGuild hands a guild's batch to its relays when it has a relay tier
// (Deps.Relays), else, and for nodes a relay did not take, to the sink.
// Every dispatch of a guild goes this way, so a gateway node receives one
// guild's events on one path, in the actor's order, while the relay set
// stays the same.
func (b *batcher) flushGuild(ctx context.Context, a *Actor) {
	if !b.replayable {
		a.noteOpaque(b.typ)
	}
	if a.sliced != nil {
		b.sliceDirect(ctx, a)
		return
	}
	r := a.svc.deps.Relays
	if r == nil || len(b.byNode) == 0 {
		b.flush(ctx, a.svc)
		return
	}
	relayed, failed := r.Relay(ctx, a.id, b.typ, b.payloads, b.byNode)
	if !relayed {
		b.flush(ctx, a.svc)
		return
	}
	for n, ts := range b.byNode {
		if !slices.Contains(failed, n) {
			a.svc.metrics.deliveries.Add(float64(len(ts)))
		}
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		b.deliver(ctx, a.svc, failed)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Every payload is a wire type whose encoding cannot fail.
		panic("guild: encode payload: " + err.Error())
	}
	return b
}

// sendTo delivers one dispatch to one session.
func (a *Actor) sendTo(ctx context.Context, s event.Session, typ string, payload any) {
	b := newBatcher(typ, mustJSON(payload))
	b.add(s, 0)
	b.flushGuild(ctx, a)
}

// broadcast delivers a guild-wide event to every subscriber with intent.
func (a *Actor) broadcast(ctx context.Context, typ string, payload any, intent uint64) {
	raw := mustJSON(payload)
	a.record(backlogEntry{kind: backlogGuild, typ: typ, payload: raw, intent: intent})
	if a.sliced != nil {
		a.sliceEvent(ctx, &fanout.Event{Type: typ, Payloads: []json.RawMessage{raw}, Kind: fanout.KindGuild, Intent: intent})
		return
	}
	b := newBatcher(typ, raw)
	b.replayable = true
	for _, sub := range a.sortedSubs() {
		if wants(sub.s, intent) {
			b.add(sub.s, 0)
		}
	}
	b.flushGuild(ctx, a)
}

// broadcastChannel delivers a channel event to subscribers who see the
// channel; message-content events (passiveContent) skip sessions passive
// in it.
func (a *Actor) broadcastChannel(ctx context.Context, typ string, channelID snowflake.ID, payload any, intent uint64) {
	if typ == "CHANNEL_PINS_UPDATE" {
		a.notePin(channelID, payload)
	}
	content := passiveContent[typ]
	raw := mustJSON(payload)
	a.record(backlogEntry{kind: backlogChannel, typ: typ, payload: raw, intent: intent, channel: channelID, content: content})
	if a.slicedChannel(channelID) {
		kind := fanout.KindChannel
		if content {
			kind = fanout.KindContent
		}
		a.sliceEvent(ctx, &fanout.Event{Type: typ, Payloads: []json.RawMessage{raw}, Kind: kind, Intent: intent, Channel: channelID})
		return
	}
	b := newBatcher(typ, raw)
	b.replayable = true
	skipped := 0
	for _, sub := range a.sortedSubs() {
		if wants(sub.s, intent) && a.canView(sub.s.UserID, channelID) {
			if content && a.passiveSkips(sub.s, channelID) {
				skipped++
				continue
			}
			b.add(sub.s, 0)
		}
	}
	a.svc.metrics.passiveSkipped.Add(float64(skipped))
	b.flushGuild(ctx, a)
}

// sortedSubs returns subscribers in session id order, so deliveries are
// deterministic.
// The slice is cached until the subscriber set changes; callers must not
// keep it across changes.
func (a *Actor) sortedSubs() []*subscriber {
	if a.subsSorted != nil {
		return a.subsSorted
	}
	out := make([]*subscriber, 0, len(a.subs))
	for _, s := range a.subs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y *subscriber) int {
		switch {
		case x.s.ID < y.s.ID:
			return -1
		case x.s.ID > y.s.ID:
			return 1
		}
		return 0
	})
	a.subsSorted = out
	return out
}

// addSub and removeSub change the subscriber set.
func (a *Actor) addSub(sub *subscriber) {
	a.subs[sub.s.ID] = sub
	a.subsSorted = nil
	a.backlogAttached(sub.s.ID)
	if a.sliced != nil {
		a.sliceAdd(context.Background(), sub.s)
	} else {
		a.sliceCheck(context.Background())
	}
}

func (a *Actor) removeSub(id event.SessionID) {
	sub := a.subs[id]
	delete(a.subs, id)
	a.subsSorted = nil
	a.backlogDetached(id)
	if a.sliced != nil {
		a.sliceRemove(context.Background(), id)
		a.sliceCheck(context.Background())
	}
	a.forgetPassive(id)
	a.voiceSessionGone(context.Background(), id)
	a.subRemoved(context.Background(), sub)
}

// fanoutMessage delivers MESSAGE_CREATE or MESSAGE_UPDATE: to sessions that
// see the channel and have GUILD_MESSAGES; variant 1 (content stripped) to
// bots without MESSAGE_CONTENT unless they wrote or are mentioned in it.
// A session passive in the channel gets only a MESSAGE_CREATE that
// mentions it; the others it is left out of reach it as PASSIVE_UPDATE_V1
// (passive.go).
func (a *Actor) fanoutMessage(ctx context.Context, typ string, m wire.Message) {
	ctx, span := tracing.Start(ctx, "guild.fanout", attribute.String("event", typ))
	defer span.End()
	full := mustJSON(m)
	a.record(backlogEntry{kind: backlogMessage, typ: typ, payload: full, msg: &m})
	if a.slicedChannel(m.ChannelID) {
		a.sliceMessage(ctx, typ, m, full)
		return
	}
	var stripped json.RawMessage
	b := newBatcher(typ, full)
	b.replayable = true
	skipped := 0
	for _, sub := range a.sortedSubs() {
		s := sub.s
		if !wants(s, IntentGuildMessages) || !a.canView(s.UserID, m.ChannelID) {
			continue
		}
		if a.passiveSkips(s, m.ChannelID) && (typ != "MESSAGE_CREATE" || !a.mentionsSession(m, s)) {
			skipped++
			continue
		}
		variant := 0
		if s.Bot && s.Intents&IntentMessageContent == 0 && m.Author.ID != s.UserID && !mentions(m, s.UserID) {
			if stripped == nil {
				stripped = mustJSON(wire.StripContent(m))
				b.payloads = append(b.payloads, stripped)
			}
			variant = 1
		}
		b.add(s, variant)
	}
	a.svc.metrics.passiveSkipped.Add(float64(skipped))
	if skipped > 0 && typ == "MESSAGE_CREATE" {
		a.markDirty(m.ChannelID)
	}
	b.flushGuild(ctx, a)
}

func mentions(m wire.Message, userID snowflake.ID) bool {
	for _, u := range m.Mentions {
		if u.ID == userID {
			return true
		}
	}
	return false
}

// syncVisibility tells each subscriber which channels appeared
// (CHANNEL_CREATE), disappeared (CHANNEL_DELETE) or, among updated,
// changed while staying visible (CHANNEL_UPDATE), after a change that may
// have moved permissions. deleted holds channels removed by the change;
// onlyUser, when set, limits the work to that user's sessions.
// It runs in the actor, so the events are ordered with the message stream:
// a member who lost a channel gets CHANNEL_DELETE before the next event.
func (a *Actor) syncVisibility(ctx context.Context, updated map[snowflake.ID]bool, deleted map[snowflake.ID]store.Channel, onlyUser snowflake.ID) {
	// A session replayed to after a move gets the guild's channels from
	// a fresh GUILD_CREATE, not from these events (backlog.go); the
	// change counts even when no subscriber is told.
	a.noteOpaque("CHANNEL_UPDATE")
	if a.sliced != nil {
		// The relays keep their sessions' channel lists (sliced.go).
		a.sliceSyncVisibility(ctx, updated, deleted, onlyUser)
		a.listsOnVisibility(ctx, updated, deleted, onlyUser)
		return
	}
	type key struct {
		typ string
		id  snowflake.ID
	}
	type group struct {
		key
		ch store.Channel
		b  *batcher
	}
	groups := make(map[key]*group)
	add := func(typ string, c store.Channel, s event.Session) {
		typ = fanout.ThreadEvent(typ, c.Thread != nil)
		k := key{typ, c.ID}
		g := groups[k]
		if g == nil {
			wc := wire.ChannelFrom(c, nil)
			wc.NewlyCreated = typ == "THREAD_CREATE" && c.ID == a.newThread
			g = &group{key: k, ch: c, b: newBatcher(typ, mustJSON(wc))}
			groups[k] = g
		}
		g.b.add(s, 0)
	}
	// Sessions of one user share the computed set; sets are replaced,
	// never changed in place.
	perUser := make(map[snowflake.ID]map[snowflake.ID]bool)
	// syncs are the threads that appear with their parent, per session:
	// one THREAD_LIST_SYNC each (threads.go), not a THREAD_CREATE apiece.
	var syncs []threadSync
	for _, sub := range a.sortedSubs() {
		if onlyUser != 0 && sub.s.UserID != onlyUser {
			continue
		}
		now, ok := perUser[sub.s.UserID]
		if !ok {
			now = a.visibleChannels(sub.s.UserID)
			perUser[sub.s.UserID] = now
		}
		send := wants(sub.s, IntentGuilds)
		for id := range sub.visible {
			if now[id] || !send {
				continue
			}
			if c, ok := a.channels[id]; ok {
				add("CHANNEL_DELETE", *c, sub.s)
			} else if c, ok := deleted[id]; ok {
				add("CHANNEL_DELETE", c, sub.s)
			}
		}
		var synced []snowflake.ID
		for id := range now {
			if !send {
				break
			}
			if c := a.channels[id]; !sub.visible[id] && c.Thread != nil && now[c.ParentID] && !sub.visible[c.ParentID] {
				synced = append(synced, id)
				continue
			}
			if !sub.visible[id] {
				add("CHANNEL_CREATE", *a.channels[id], sub.s)
			} else if updated[id] {
				add("CHANNEL_UPDATE", *a.channels[id], sub.s)
			}
		}
		if len(synced) > 0 {
			syncs = append(syncs, threadSync{sub.s, synced})
		}
		sub.visible = now
	}
	// One batch per (event, channel), flushed in channel order with
	// deletes first: every session sees its own events in that order.
	ordered := make([]*group, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	slices.SortFunc(ordered, func(x, y *group) int {
		if x.typ != y.typ {
			return fanout.ChannelEventRank(x.typ) - fanout.ChannelEventRank(y.typ)
		}
		return compareChannels(x.ch, y.ch)
	})
	for _, g := range ordered {
		g.b.flushGuild(ctx, a)
	}
	a.sendThreadSyncs(ctx, syncs)
	a.listsOnVisibility(ctx, updated, deleted, onlyUser)
}

// compareChannels orders channels by position, then id.
func compareChannels(x, y store.Channel) int {
	if x.Position != y.Position {
		return x.Position - y.Position
	}
	switch {
	case x.ID < y.ID:
		return -1
	case x.ID > y.ID:
		return 1
	}
	return 0
}
