package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// Gateway intents a slice filters on (Discord's bits).
const (
	intentGuildMessages  uint64 = 1 << 9
	intentMessageContent uint64 = 1 << 15
)

// PassiveUpdateType is the dispatch naming the channels whose last
// message changed, for a passive session.
const PassiveUpdateType = "PASSIVE_UPDATE_V1"

// PassiveInterval is the least time between two PASSIVE_UPDATE_V1 of one
// guild to one session.
const PassiveInterval = 2 * time.Second

const defaultLargeThreshold = 50

// Slice is one relay's part of one guild: its sessions and a replica of
// the guild's permission state. It is safe for concurrent use; entries
// must be applied in stream order.
type Slice struct {
	guild snowflake.ID
	sink  event.Sink
	now   func() time.Time

	mu    sync.Mutex
	owner string
	// via is the owner process that last sent an entry of the owner
	// ("": none over a connection): when it has no stream left, the
	// slice expires (Relay.expire).
	via      string
	dropped  bool
	version  uint64
	synced   bool
	members  int
	engine   *permissions.Engine
	roles    map[snowflake.ID][]snowflake.ID // member roles, for role mentions
	channels map[snowflake.ID]Channel
	// vis is every channel of the guild, as the latest Visibility or
	// snapshot listed them: the channel lists sessions are kept at.
	vis      map[snowflake.ID]*VisibleChannel
	sessions map[event.SessionID]*slot
	sorted   []*slot
	// passive state: channels changed while a passive session was left
	// out, their last messages and pins, and the flush schedule.
	dirty     map[snowflake.ID]bool
	last      map[snowflake.ID]snowflake.ID
	pins      map[snowflake.ID]json.RawMessage
	armed     bool
	lastFlush time.Time
	stats     Stats
}

// Stats counts a slice's work.
type Stats struct {
	Entries, Events, Deliveries, Skipped, PassiveUpdates, Behind uint64
	// Mentioned counts the full deliveries of a MESSAGE_CREATE to a
	// session passive in its channel, because it mentions the session
	// (its user, a role of it, @everyone/@here): the contract's
	// exception, part of Deliveries.
	Mentioned uint64
}

type slot struct {
	s      event.Session
	active map[snowflake.ID]bool
	// visible is the channels the session was told it sees (GUILD_CREATE
	// and every CHANNEL_* since); sessions of one user share it.
	visible map[snowflake.ID]bool
}

// errDropped is Apply's answer once the slice was dropped: the relay
// removes it and applies the entry to a fresh one.
var errDropped = errors.New("fanout: slice dropped")

// NewSlice returns an empty slice of a guild delivering through sink. It
// refuses events until the owner's first snapshot.
func NewSlice(guild snowflake.ID, sink event.Sink) *Slice {
	x := &Slice{guild: guild, sink: sink, now: time.Now}
	x.reset()
	return x
}

func (x *Slice) reset() {
	x.engine = permissions.NewEngine(x.guild, 0)
	x.roles = make(map[snowflake.ID][]snowflake.ID)
	x.channels = make(map[snowflake.ID]Channel)
	x.vis = make(map[snowflake.ID]*VisibleChannel)
	x.sessions = make(map[event.SessionID]*slot)
	x.sorted = nil
	x.dirty = make(map[snowflake.ID]bool)
	x.last = make(map[snowflake.ID]snowflake.ID)
	x.pins = make(map[snowflake.ID]json.RawMessage)
}

// Sessions is the number of sessions the slice holds.
func (x *Slice) Sessions() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.sessions)
}

// Stats returns the slice's counters.
func (x *Slice) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stats
}

// Apply applies one entry of the owner's stream and delivers what it
// carries. It returns ErrBehind, delivering nothing, when the entry was
// produced at another state version than the slice holds.
func (x *Slice) Apply(ctx context.Context, e *Entry) error {
	return x.apply(ctx, "", e)
}

// expire drops the slice when its owner's entries last came from process
// via, and reports whether it did.
func (x *Slice) expire(via string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dropped || x.via == "" || x.via != via {
		return false
	}
	x.reset()
	x.synced = false
	x.dropped = true
	return true
}

func (x *Slice) apply(ctx context.Context, via string, e *Entry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.stats.Entries++
	switch {
	case x.dropped:
		return errDropped
	case e.Reset:
		x.reset()
		x.synced = true
		x.owner = e.Owner
	case !x.synced && x.owner == "" && !e.Drop:
		// No snapshot yet (a relay that restarted, or a slice that
		// expired): whoever sent it, the owner must send one.
		x.stats.Behind++
		return fmt.Errorf("guild %d entry at version %d before a snapshot: %w", x.guild, e.Version, ErrBehind)
	case e.Owner != x.owner:
		return fmt.Errorf("guild %d entry of owner %q, slice owned by %q: %w", x.guild, e.Owner, x.owner, ErrSuperseded)
	}
	// The owner is alive on this stream, whatever becomes of the entry.
	x.via = via
	switch {
	case e.Reset:
	case e.Drop:
		x.reset()
		x.synced = false
		x.dropped = true
		return nil
	case !x.synced:
		x.stats.Behind++
		return fmt.Errorf("guild %d entry at version %d before a snapshot: %w", x.guild, e.Version, ErrBehind)
	case len(e.Changes) > 0 && e.Version != x.version+1,
		len(e.Changes) == 0 && e.Version != x.version:
		x.stats.Behind++
		x.synced = false
		return fmt.Errorf("guild %d entry at version %d, slice at %d: %w", x.guild, e.Version, x.version, ErrBehind)
	}
	x.version = e.Version
	if e.Members > 0 {
		x.members = e.Members
	}
	for _, c := range e.Changes {
		x.engine.Apply(c)
		switch c.Op {
		case permissions.OpMember:
			x.roles[c.ID] = c.Member.Roles
		case permissions.OpDeleteMember:
			delete(x.roles, c.ID)
		}
	}
	for _, c := range e.Channels {
		if c.Gone {
			delete(x.channels, c.ID)
		} else {
			x.channels[c.ID] = c
		}
	}
	for _, id := range e.Remove {
		delete(x.sessions, id)
		x.sorted = nil
	}
	if v := e.Visibility; v != nil {
		x.syncVisibility(ctx, v)
	}
	visible := make(map[snowflake.ID]map[snowflake.ID]bool)
	for _, sl := range e.Add {
		if m := sl.Member; m != nil {
			x.engine.SetMember(*m)
			x.roles[m.UserID] = m.Roles
		}
		// What its GUILD_CREATE, sent at this version, listed.
		vs, ok := visible[sl.Session.UserID]
		if !ok {
			vs = x.visibleTo(sl.Session.UserID)
			visible[sl.Session.UserID] = vs
		}
		s := &slot{s: sl.Session, visible: vs}
		if sl.HasActive {
			s.active = toSet(sl.Active)
		}
		x.sessions[sl.Session.ID] = s
		x.sorted = nil
	}
	if a := e.Active; a != nil {
		if s := x.sessions[a.Session]; s != nil {
			s.active = toSet(a.Channels)
		}
	}
	if d := e.Direct; d != nil {
		x.deliverDirect(ctx, d)
	}
	if ev := e.Event; ev != nil {
		x.stats.Events++
		x.filter(ctx, ev)
	}
	return nil
}

func toSet(ids []snowflake.ID) map[snowflake.ID]bool {
	m := make(map[snowflake.ID]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func (x *Slice) slots() []*slot {
	if x.sorted == nil {
		x.sorted = make([]*slot, 0, len(x.sessions))
		for _, s := range x.sessions {
			x.sorted = append(x.sorted, s)
		}
		slices.SortFunc(x.sorted, func(a, b *slot) int { return strings.Compare(string(a.s.ID), string(b.s.ID)) })
	}
	return x.sorted
}

// batches groups targets by gateway node for one dispatch.
type batches struct {
	typ      string
	payloads []json.RawMessage
	byNode   map[string][]event.Target
}

func (b *batches) add(s event.Session, variant int) {
	if b.byNode == nil {
		b.byNode = make(map[string][]event.Target)
	}
	b.byNode[s.Node] = append(b.byNode[s.Node], event.Target{Session: s.ID, Variant: variant})
}

func (x *Slice) deliver(ctx context.Context, b *batches) {
	nodes := make([]string, 0, len(b.byNode))
	for n := range b.byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		x.stats.Deliveries += uint64(len(b.byNode[n]))
		x.sink.Deliver(ctx, n, event.Batch{Type: b.typ, Payloads: b.payloads, Targets: b.byNode[n]})
	}
}

func (x *Slice) deliverDirect(ctx context.Context, d *Direct) {
	b := &batches{typ: d.Type, payloads: d.Payloads, byNode: make(map[string][]event.Target)}
	for n, ts := range d.Targets {
		for _, t := range ts {
			if _, ok := x.sessions[t.Session]; ok {
				b.byNode[n] = append(b.byNode[n], t)
			}
		}
	}
	x.deliver(ctx, b)
}

func wants(s event.Session, intent uint64) bool { return !s.Bot || s.Intents&intent != 0 }

// viewVia is the channel whose permissions decide whether a channel is
// visible: a thread's parent.
func (x *Slice) viewVia(ch snowflake.ID) snowflake.ID {
	if c, ok := x.channels[ch]; ok && c.Thread {
		return c.Parent
	}
	return ch
}

func (x *Slice) canView(user, ch snowflake.ID) bool {
	return permissions.AccessOf(x.engine.Channel(user, x.viewVia(ch), x.now())).CanView()
}

func (x *Slice) passive(s event.Session) bool {
	if s.Bot {
		return false
	}
	t := s.LargeThreshold
	if t <= 0 {
		t = defaultLargeThreshold
	}
	return x.members > t
}

func (x *Slice) activeIn(s *slot, ch snowflake.ID) bool {
	if s.active[ch] {
		return true
	}
	c, ok := x.channels[ch]
	return ok && c.Thread && s.active[c.Parent]
}

func (x *Slice) mentioned(ev *Event, user snowflake.ID) bool {
	if ev.MentionEveryone || slices.Contains(ev.MentionUsers, user) {
		return true
	}
	for _, r := range ev.MentionRoles {
		if slices.Contains(x.roles[user], r) {
			return true
		}
	}
	return false
}

// filter delivers an event to the slice's sessions that get it.
func (x *Slice) filter(ctx context.Context, ev *Event) {
	if ev.Type == "CHANNEL_PINS_UPDATE" {
		var p struct {
			LastPinTimestamp json.RawMessage `json:"last_pin_timestamp"`
		}
		if json.Unmarshal(ev.Payloads[0], &p) == nil {
			x.pins[ev.Channel] = p.LastPinTimestamp
		}
	}
	b := &batches{typ: ev.Type, payloads: ev.Payloads}
	skipped := 0
	for _, s := range x.slots() {
		ss := s.s
		if !wants(ss, ev.Intent) {
			continue
		}
		if ev.Kind == KindGuild {
			b.add(ss, 0)
			continue
		}
		if !x.canView(ss.UserID, ev.Channel) {
			continue
		}
		if ev.Kind != KindChannel && x.passive(ss) && !x.activeIn(s, ev.Channel) {
			if ev.Kind != KindMessage || !ev.Create || !x.mentioned(ev, ss.UserID) {
				skipped++
				continue
			}
			x.stats.Mentioned++
		}
		variant := 0
		if ev.Kind == KindMessage && len(ev.Payloads) > 1 && ss.Bot && ss.Intents&intentMessageContent == 0 &&
			ev.Author != ss.UserID && !slices.Contains(ev.MentionUsers, ss.UserID) {
			variant = 1
		}
		b.add(ss, variant)
	}
	x.stats.Skipped += uint64(skipped)
	if ev.Kind == KindMessage && ev.Create {
		if ev.MessageID > x.last[ev.Channel] {
			x.last[ev.Channel] = ev.MessageID
		}
		if skipped > 0 {
			x.markDirty(ev.Channel)
		}
	}
	x.deliver(ctx, b)
}

// markDirty schedules a passive flush: now after a quiet period, else
// PassiveInterval after the previous one.
func (x *Slice) markDirty(ch snowflake.ID) {
	x.dirty[ch] = true
	if x.armed {
		return
	}
	x.armed = true
	delay := max(PassiveInterval-x.now().Sub(x.lastFlush), 0)
	time.AfterFunc(delay, func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.flushPassive(context.Background())
	})
}

type passiveChannel struct {
	ID               snowflake.ID    `json:"id"`
	LastMessageID    *snowflake.ID   `json:"last_message_id"`
	LastPinTimestamp json.RawMessage `json:"last_pin_timestamp"`
}

type passiveUpdate struct {
	GuildID     snowflake.ID      `json:"guild_id"`
	Channels    []passiveChannel  `json:"channels"`
	VoiceStates []json.RawMessage `json:"voice_states"`
	Members     []json.RawMessage `json:"members"`
}

// flushPassive sends PASSIVE_UPDATE_V1 to the slice's passive sessions,
// as the owner does for the sessions it filters (guild/passive.go).
func (x *Slice) flushPassive(ctx context.Context) {
	x.armed = false
	x.lastFlush = x.now()
	if len(x.dirty) == 0 || !x.synced {
		return
	}
	dirty := make([]snowflake.ID, 0, len(x.dirty))
	for id := range x.dirty {
		dirty = append(dirty, id)
	}
	clear(x.dirty)
	slices.Sort(dirty)
	groups := make(map[string]*batches)
	var order []string
	mask := make([]byte, len(dirty))
	for _, s := range x.slots() {
		if !x.passive(s.s) {
			continue
		}
		n := 0
		for i, ch := range dirty {
			mask[i] = '0'
			if !x.activeIn(s, ch) && x.canView(s.s.UserID, ch) {
				mask[i] = '1'
				n++
			}
		}
		if n == 0 {
			continue
		}
		b := groups[string(mask)]
		if b == nil {
			u := passiveUpdate{GuildID: x.guild, Channels: []passiveChannel{}, VoiceStates: []json.RawMessage{}, Members: []json.RawMessage{}}
			for i, ch := range dirty {
				if mask[i] == '1' {
					pin := x.pins[ch]
					if pin == nil {
						pin = json.RawMessage("null")
					}
					c := passiveChannel{ID: ch, LastPinTimestamp: pin}
					if l := x.last[ch]; l != 0 {
						c.LastMessageID = &l
					}
					u.Channels = append(u.Channels, c)
				}
			}
			raw, _ := json.Marshal(u)
			b = &batches{typ: PassiveUpdateType, payloads: []json.RawMessage{raw}}
			groups[string(mask)] = b
			order = append(order, string(mask))
		}
		b.add(s.s, 0)
		x.stats.PassiveUpdates++
	}
	slices.Sort(order)
	for _, k := range order {
		x.deliver(ctx, groups[k])
	}
}
