package permissions

import (
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The cache. Members with the same roles share one interned roleSet with a
// small dense id. Each channel keeps a column indexed by role set id with
// the result of steps 2-4 (base, @everyone overwrite, role overwrites),
// before the member overwrite, the implicit rules and the timeout, which
// Channel applies on every lookup because they depend on the member or on
// the time. A cached lookup touches the member's map slot, the channel and
// one word of its column.
//
// An entry is stored with cachedFlag set so that a zero word means "not
// cached"; no permission uses bit 63. An administrator's entry is cachedAll.
//
// Invalidation is precise: SetRole/DeleteRole clear the entries of the role
// sets holding the role (every entry for @everyone), SetOverwrites and
// DeleteChannel clear one channel's column, SetMember moves one member to
// another role set; a role set no member holds any more is dropped with its
// entries.

const (
	cachedFlag Bits = 1 << 63
	cachedAll       = cachedFlag | 1<<62
)

// roleSet is one distinct set of roles held by at least one member.
type roleSet struct {
	key    string
	roles  []snowflake.ID // sorted, no duplicates, no @everyone
	refs   int            // members holding it
	baseOK bool
	base   Bits // @everyone | existing roles, valid when baseOK
}

// baseBits returns @everyone | the set's existing roles.
func (s *roleSet) baseBits(e *Engine) Bits {
	if s.baseOK {
		return s.base
	}
	p := e.roles[e.guildID]
	for _, r := range s.roles {
		p |= e.roles[r] // a missing role contributes 0
	}
	s.base, s.baseOK = p, true
	return p
}

// fill computes and stores the entry of role set id in ch.
func (e *Engine) fill(id int32, ch *channel) Bits {
	set := e.sets[id]
	p := set.baseBits(e)
	var v Bits
	if p&Administrator != 0 {
		v = cachedAll
	} else {
		if ch.hasEveryone {
			p = p&^ch.everyone.deny | ch.everyone.allow
		}
		if len(ch.roles) != 0 {
			var allow, deny Bits
			for _, r := range set.roles {
				if ow, ok := ch.roles[r]; ok {
					if _, exists := e.roles[r]; exists {
						allow |= ow.allow
						deny |= ow.deny
					}
				}
			}
			p = p&^deny | allow
		}
		v = p | cachedFlag
	}
	if int(id) >= len(ch.cache) {
		ch.cache = slices.Grow(ch.cache, len(e.sets)-len(ch.cache))[:len(e.sets)]
	}
	ch.cache[id] = v
	e.entries++
	return v
}

// intern returns the id of the role set of a member's role list, adding a
// reference.
func (e *Engine) intern(roles []snowflake.ID) int32 {
	norm := e.normalize(roles)
	e.keyBuf = roleKey(e.keyBuf[:0], norm)
	if id, ok := e.setIDs[string(e.keyBuf)]; ok {
		e.sets[id].refs++
		return id
	}
	s := &roleSet{key: string(e.keyBuf), roles: slices.Clone(norm), refs: 1}
	var id int32
	if n := len(e.freeSets); n > 0 {
		id = e.freeSets[n-1]
		e.freeSets = e.freeSets[:n-1]
		e.sets[id] = s
	} else {
		id = int32(len(e.sets))
		e.sets = append(e.sets, s)
	}
	e.setIDs[s.key] = id
	return id
}

// release drops a reference and forgets the set, and its entries, when no
// member holds it.
func (e *Engine) release(id int32) {
	s := e.sets[id]
	s.refs--
	if s.refs > 0 {
		return
	}
	e.clearSet(id)
	delete(e.setIDs, s.key)
	e.sets[id] = nil
	e.freeSets = append(e.freeSets, id)
}

// clearSet drops every entry of a role set.
func (e *Engine) clearSet(id int32) {
	e.sets[id].baseOK = false
	for _, ch := range e.channels {
		if int(id) < len(ch.cache) && ch.cache[id] != 0 {
			ch.cache[id] = 0
			e.entries--
		}
	}
}

// invalidateRole clears every entry that a change of roleID can affect.
func (e *Engine) invalidateRole(roleID snowflake.ID) {
	if roleID == e.guildID {
		for _, s := range e.sets {
			if s != nil {
				s.baseOK = false
			}
		}
		for _, ch := range e.channels {
			e.invalidateChannel(ch)
		}
		return
	}
	for id, s := range e.sets {
		if s == nil {
			continue
		}
		if _, ok := slices.BinarySearch(s.roles, roleID); ok {
			e.clearSet(int32(id))
		}
	}
}

// invalidateChannel clears one channel's column.
func (e *Engine) invalidateChannel(ch *channel) {
	for _, v := range ch.cache {
		if v != 0 {
			e.entries--
		}
	}
	clear(ch.cache)
}
