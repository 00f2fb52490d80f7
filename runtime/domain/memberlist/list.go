package memberlist

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Group ids of the two built-in groups.
const (
	GroupOnline  = "online"
	GroupOffline = "offline"
)

// Statuses a member can have as others see it. Anything other than
// StatusOffline counts as online.
const (
	StatusOnline  = "online"
	StatusIdle    = "idle"
	StatusDND     = "dnd"
	StatusOffline = "offline"
)

// Member is one member as a list shows it.
type Member struct {
	UserID snowflake.ID
	// Name is the display name the list sorts by (nick, else global name,
	// else username); compared case-insensitively.
	Name string
	// Roles are the member's role ids; the highest hoisted one picks the
	// member's group.
	Roles []snowflake.ID
	// Status is the member's status as others see it (invisible is
	// StatusOffline).
	Status string
	// Data is the row's member object as the caller serialised it:
	// Discord's member object with `user`, `roles` and a `presence`
	// ({"user":{"id"},"status","activities","client_status"}). The list
	// never parses it.
	Data json.RawMessage
}

// Role is a hoisted role: members whose highest hoisted role it is are
// listed under it, roles with higher positions first.
type Role struct {
	ID       snowflake.ID
	Position int
}

// rowKey orders rows: by section (hoisted roles by position descending,
// then online, then offline), a section's header row first, then by folded
// name, then by user id.
type rowKey struct {
	section int
	member  bool
	name    string
	id      snowflake.ID
}

func compareRows(a, b rowKey) int {
	if c := cmp.Compare(a.section, b.section); c != 0 {
		return c
	}
	if a.member != b.member {
		if a.member {
			return 1
		}
		return -1
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// entry is a listed member.
type entry struct {
	key  rowKey
	item json.RawMessage // {"member":...}
	m    Member
}

// section is one group of rows.
type section struct {
	id    string
	count int
}

// rows is the sorted content of one list without subscriptions.
type rows struct {
	showOffline bool
	tree        *Tree[rowKey]
	members     map[snowflake.ID]*entry
	sections    []section // hoisted..., online, offline
	hoisted     map[snowflake.ID]int
	rolePos     map[snowflake.ID]int
	online      int
}

func newRows(showOffline bool, roles []Role) *rows {
	r := &rows{showOffline: showOffline, members: make(map[snowflake.ID]*entry)}
	r.setRoles(roles)
	return r
}

// setRoles replaces the hoisted roles and rebuilds the tree.
func (r *rows) setRoles(roles []Role) {
	roles = slices.Clone(roles)
	slices.SortFunc(roles, func(a, b Role) int {
		if a.Position != b.Position {
			return cmp.Compare(b.Position, a.Position)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	r.hoisted = make(map[snowflake.ID]int, len(roles))
	r.rolePos = make(map[snowflake.ID]int, len(roles))
	r.sections = r.sections[:0]
	for i, ro := range roles {
		r.hoisted[ro.ID] = i
		r.rolePos[ro.ID] = ro.Position
		r.sections = append(r.sections, section{id: ro.ID.String()})
	}
	r.sections = append(r.sections, section{id: GroupOnline}, section{id: GroupOffline})
	r.tree = NewTree(compareRows)
	r.online = 0
	for _, e := range r.members {
		e.key = r.keyOf(e.m)
		r.add(e)
	}
}

// keyOf computes a member's row key.
func (r *rows) keyOf(m Member) rowKey {
	k := rowKey{member: true, name: strings.ToLower(m.Name), id: m.UserID}
	switch {
	case m.Status == StatusOffline:
		k.section = len(r.sections) - 1
	default:
		k.section = len(r.sections) - 2
		best := -1
		for _, id := range m.Roles {
			if s, ok := r.hoisted[id]; ok && (best < 0 || s < best) {
				best = s
			}
		}
		if best >= 0 {
			k.section = best
		}
	}
	return k
}

// listed reports whether a member with status has a row.
func (r *rows) listed(status string) bool { return status != StatusOffline || r.showOffline }

// add inserts e's rows: the group's header if e is its first member, and
// e's own row.
func (r *rows) add(e *entry) {
	s := &r.sections[e.key.section]
	s.count++
	if e.key.section != len(r.sections)-1 {
		r.online++
	}
	if s.count == 1 {
		r.tree.Insert(rowKey{section: e.key.section})
	}
	r.tree.Insert(e.key)
}

// item renders the row at index i.
func (r *rows) item(i int) json.RawMessage {
	k, ok := r.tree.At(i)
	if !ok {
		return nil
	}
	return r.itemOf(k)
}

func (r *rows) itemOf(k rowKey) json.RawMessage {
	if !k.member {
		s := r.sections[k.section]
		return groupItem(s.id, s.count)
	}
	return r.members[k.id].item
}

// groups returns the non-empty groups in list order.
func (r *rows) groups() []GroupCount {
	out := make([]GroupCount, 0, 4)
	for _, s := range r.sections {
		if s.count > 0 {
			out = append(out, GroupCount{ID: s.id, Count: s.count})
		}
	}
	return out
}
