// Package memberlist keeps Discord's lazy member list: per visibility
// group of a guild's channels, the members who can see those channels,
// sorted into hoisted-role groups, then the unhoisted online members, then
// (when shown) the offline ones, each group by display name.
//
// Clients subscribe to row ranges (gateway op 14) and receive
// GUILD_MEMBER_LIST_UPDATE: a SYNC of the rows, then INSERT, UPDATE and
// DELETE operations at row indexes. A change reaches exactly the sessions
// whose ranges it touches, so a member going idle in a 100,000-row list is
// one UPDATE to the few sessions showing that row, not a broadcast.
//
// Rows live in an order-statistic treap (Tree) so that every index
// operation costs O(log n). A List is owned by its guild actor and is not
// safe for concurrent use; it performs no I/O and reads no clock.
package memberlist

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Config bounds subscriptions and picks what a list shows.
type Config struct {
	// ShowOffline lists offline members in an "offline" group at the end.
	// Discord shows them only in small guilds. Default false.
	ShowOffline bool
	// MaxRanges is how many ranges one session may hold in one list.
	// Default 5.
	MaxRanges int
	// MaxWidth is the widest range, in rows; wider ranges are cut. Default
	// 100.
	MaxWidth int
}

func (c *Config) fill() {
	if c.MaxRanges <= 0 {
		c.MaxRanges = 5
	}
	if c.MaxWidth <= 0 {
		c.MaxWidth = 100
	}
}

// List is one member list: the sorted rows of one visibility group and the
// sessions subscribed to ranges of it.
type List struct {
	guildID     snowflake.ID
	id          string
	cfg         Config
	rows        *rows
	memberCount int

	subs  map[event.SessionID]*sub
	index subIndex

	// Change scratch.
	gen, stamp uint64
	step       int
	touched    []*sub
	items      map[int]json.RawMessage // rows read during the current step
}

// New returns an empty list with id listID (see GroupKey) in a guild with
// the given hoisted roles.
func New(guildID snowflake.ID, listID string, hoisted []Role, cfg Config) *List {
	cfg.fill()
	return &List{
		guildID: guildID,
		id:      listID,
		cfg:     cfg,
		rows:    newRows(cfg.ShowOffline, hoisted),
		subs:    make(map[event.SessionID]*sub),
		index:   subIndex{w: cfg.MaxWidth},
		items:   make(map[int]json.RawMessage),
	}
}

// ID returns the list id sent as the payload's `id`.
func (l *List) ID() string { return l.id }

// Len returns the number of rows, group headers included.
func (l *List) Len() int { return l.rows.tree.Len() }

// OnlineCount returns how many listed members are not offline.
func (l *List) OnlineCount() int { return l.rows.online }

// Groups returns the non-empty groups in list order with their counts.
func (l *List) Groups() []GroupCount { return l.rows.groups() }

// SetMemberCount sets the guild's member count reported as
// `member_count` in later payloads.
func (l *List) SetMemberCount(n int) { l.memberCount = n }

// Subscribers returns how many sessions hold ranges of the list.
func (l *List) Subscribers() int { return len(l.subs) }

// Index returns the row index of a member, or false if it has no row.
func (l *List) Index(userID snowflake.ID) (int, bool) {
	e := l.rows.members[userID]
	if e == nil {
		return -1, false
	}
	return l.rows.tree.Rank(e.key)
}

// Rows returns the row items at indexes a through b, clipped to the list:
// `{"group":{"id","count"}}` for a header, `{"member":...}` for a member.
func (l *List) Rows(a, b int) []json.RawMessage {
	out := make([]json.RawMessage, 0, max(0, min(b, l.Len()-1)-a+1))
	l.rows.tree.Range(a, b, func(_ int, k rowKey) bool {
		out = append(out, l.rows.itemOf(k))
		return true
	})
	return out
}

// Shows reports whether any subscribed session currently displays the
// member's row.
func (l *List) Shows(userID snowflake.ID) bool {
	i, ok := l.Index(userID)
	if !ok {
		return false
	}
	found := false
	l.stamp++
	l.index.covering(i, l.stamp, func(*sub) { found = true })
	return found
}

// Viewers returns the sessions whose ranges show the member's row.
func (l *List) Viewers(userID snowflake.ID) []event.Session {
	i, ok := l.Index(userID)
	if !ok {
		return nil
	}
	var out []event.Session
	l.stamp++
	l.index.covering(i, l.stamp, func(s *sub) { out = append(out, s.s) })
	return out
}

// Upsert adds a member or applies a change to it (status, roles, name or
// data) and returns the operations for the sessions whose ranges it
// touches. A member whose status is offline is removed unless the list
// shows offline members.
func (l *List) Upsert(m Member) Dispatch {
	if !l.rows.listed(m.Status) {
		return l.Remove(m.UserID)
	}
	l.begin()
	key := l.rows.keyOf(m)
	e := l.rows.members[m.UserID]
	if e != nil && e.key == key {
		e.m = m
		e.item = memberItem(m.Data)
		if i, ok := l.rows.tree.Rank(key); ok {
			l.updated(i)
		}
		return l.finish()
	}
	if e != nil {
		l.dropEntry(e)
	}
	e = &entry{key: key, item: memberItem(m.Data), m: m}
	l.rows.members[m.UserID] = e
	s := &l.rows.sections[key.section]
	s.count++
	if key.section != len(l.rows.sections)-1 {
		l.rows.online++
	}
	if s.count == 1 {
		h, _ := l.rows.tree.Insert(rowKey{section: key.section})
		l.inserted(h)
	}
	i, _ := l.rows.tree.Insert(key)
	l.inserted(i)
	return l.finish()
}

// Remove deletes a member's row, if any, and returns the operations.
func (l *List) Remove(userID snowflake.ID) Dispatch {
	e := l.rows.members[userID]
	if e == nil {
		return Dispatch{}
	}
	l.begin()
	l.dropEntry(e)
	delete(l.rows.members, userID)
	return l.finish()
}

// dropEntry deletes e's row and, if its group empties, the group's header.
func (l *List) dropEntry(e *entry) {
	i, _ := l.rows.tree.Delete(e.key)
	l.deleted(i)
	s := &l.rows.sections[e.key.section]
	s.count--
	if e.key.section != len(l.rows.sections)-1 {
		l.rows.online--
	}
	if s.count == 0 {
		h, _ := l.rows.tree.Delete(rowKey{section: e.key.section})
		l.deleted(h)
	}
}

// SetRoles replaces the hoisted roles (after a role is created, deleted,
// moved or its hoist flag changes), re-sorts every row and sends each
// subscriber a SYNC of its ranges.
func (l *List) SetRoles(hoisted []Role) Dispatch {
	l.rows.setRoles(hoisted)
	l.begin()
	l.step++
	for _, s := range l.subs {
		for _, r := range s.ranges {
			l.emit(s, l.syncOp(r))
		}
	}
	return l.finish()
}

// Subscribe sets a session's ranges in this list, replacing its earlier
// ones, and returns a SYNC for each range it did not hold before. Ranges
// are clamped (negative starts to 0, width to MaxWidth); ranges that are
// inverted or start beyond the list's end plus MaxWidth are refused, and
// only the first MaxRanges are kept: the error (ErrBadRange or
// ErrTooManyRanges) reports it, and the Dispatch is valid either way. No
// ranges at all unsubscribes the session.
func (l *List) Subscribe(s event.Session, ranges []Range) (Dispatch, error) {
	kept, err := clampRanges(ranges, l.cfg.MaxRanges, l.cfg.MaxWidth, l.Len()+l.cfg.MaxWidth)
	old := l.subs[s.ID]
	var had []Range
	if old != nil {
		had = old.ranges
		l.index.remove(old)
		delete(l.subs, s.ID)
	}
	if len(kept) == 0 {
		return Dispatch{}, err
	}
	cur := &sub{s: s, ranges: kept}
	if old != nil {
		cur.seen, cur.gen = old.seen, old.gen
	}
	l.subs[s.ID] = cur
	l.index.add(cur)
	l.begin()
	l.step++
	for _, r := range kept {
		if !containsRange(had, r) {
			l.emit(cur, l.syncOp(r))
		}
	}
	if err != nil {
		err = fmt.Errorf("memberlist: list %s: %w", l.id, err)
	}
	return l.finish(), err
}

// Unsubscribe forgets a session's ranges.
func (l *List) Unsubscribe(id event.SessionID) {
	if s := l.subs[id]; s != nil {
		l.index.remove(s)
		delete(l.subs, id)
	}
}

// Ranges returns a session's current ranges.
func (l *List) Ranges(id event.SessionID) []Range {
	if s := l.subs[id]; s != nil {
		return append([]Range(nil), s.ranges...)
	}
	return nil
}

func containsRange(rs []Range, r Range) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// syncOp returns a SYNC of range r.
func (l *List) syncOp(r Range) Op {
	return Op{Op: OpSync, Range: r, Items: l.Rows(r[0], r[1])}
}

// begin starts computing one change's operations.
func (l *List) begin() {
	l.gen++
	l.step = 0
	l.touched = l.touched[:0]
}

// emit records op for subscription s in the current change.
func (l *List) emit(s *sub, op Op) {
	if s.gen != l.gen {
		s.gen = l.gen
		s.ops = s.ops[:0]
		s.sig = s.sig[:0]
		l.touched = append(l.touched, s)
	}
	s.ops = append(s.ops, pendingOp{step: l.step, op: op})
	s.sig = binary.AppendUvarint(s.sig, uint64(l.step))
	s.sig = append(s.sig, op.Op[0])
	s.sig = binary.AppendUvarint(s.sig, uint64(op.Index))
	s.sig = binary.AppendUvarint(s.sig, uint64(op.Range[0]))
	s.sig = binary.AppendUvarint(s.sig, uint64(op.Range[1]))
}

// nextStep starts the operations of one row change.
func (l *List) nextStep() {
	l.step++
	l.stamp++
	clear(l.items)
}

// rowAt returns the item at index i, read once per step: many sessions
// scrolled to the same place need the same row.
func (l *List) rowAt(i int) json.RawMessage {
	if it, ok := l.items[i]; ok {
		return it
	}
	it := l.rows.item(i)
	l.items[i] = it
	return it
}

// inserted computes the operations for a row just inserted at index i.
// Every session with a range at or after i gets the INSERT (its client
// shifts the rows after i down by one); a range that starts after i and
// whose preceding row the session does not hold also gets an UPDATE of
// its first row, which shifted in from outside.
func (l *List) inserted(i int) {
	l.nextStep()
	n := l.Len()
	item := l.rowAt(i)
	l.index.endingFrom(i, l.stamp, func(s *sub) {
		l.emit(s, Op{Op: OpInsert, Index: i, Item: item})
		for _, r := range s.ranges {
			if a := r[0]; a > i && a < n && !s.covers(a-1) {
				l.emit(s, Op{Op: OpUpdate, Index: a, Item: l.rowAt(a)})
			}
		}
	})
}

// deleted computes the operations for a row just deleted from index i.
// Every session with a range at or after i gets the DELETE; a range whose
// last row shifted in from a row the session does not hold also gets an
// UPDATE of that row.
func (l *List) deleted(i int) {
	l.nextStep()
	n := l.Len()
	l.index.endingFrom(i, l.stamp, func(s *sub) {
		l.emit(s, Op{Op: OpDelete, Index: i})
		for _, r := range s.ranges {
			if b := r[1]; b >= i && b < n && !s.covers(b+1) {
				l.emit(s, Op{Op: OpUpdate, Index: b, Item: l.rowAt(b)})
			}
		}
	})
}

// updated computes the operations for a row changed in place at index i:
// one UPDATE for the sessions showing it.
func (l *List) updated(i int) {
	l.nextStep()
	item := l.rowAt(i)
	l.index.covering(i, l.stamp, func(s *sub) {
		l.emit(s, Op{Op: OpUpdate, Index: i, Item: item})
	})
}

// finish groups the sessions touched by the change by identical operation
// sequences and encodes one payload per group.
func (l *List) finish() Dispatch {
	if len(l.touched) == 0 {
		return Dispatch{}
	}
	head := encodeHead(l.guildID, l.id, l.memberCount, l.rows.online, l.rows.groups())
	var d Dispatch
	bySig := make(map[string]int, 4)
	for _, s := range l.touched {
		vi, ok := bySig[string(s.sig)]
		if !ok {
			ops := make([]Op, len(s.ops))
			for i, p := range s.ops {
				ops[i] = p.op
			}
			vi = len(d.Variants)
			bySig[string(s.sig)] = vi
			d.Variants = append(d.Variants, Variant{
				Payload: encodeOps(head, ops),
				Ops:     ops,
			})
		}
		d.Variants[vi].Sessions = append(d.Variants[vi].Sessions, s.s)
	}
	l.touched = l.touched[:0]
	countOps(d)
	return d
}
