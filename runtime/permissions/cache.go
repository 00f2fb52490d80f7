package permissions

import (
	"slices"

	"github.com/concord-chat/concord/runtime/snowflake"
)

// The cache. Members with the same roles share one interned roleSet; each
// roleSet keeps, per channel slot, the result of steps 2-4 (base, @everyone
// overwrite, role overwrites) before the member overwrite, the implicit
// rules and the timeout, which Channel applies on every lookup because they
// depend on the member or on the time.
//
// An entry is stored with cachedFlag set so that a zero word means "not
// cached"; no permission uses bit 63. An administrator's entry is cachedAll.
//
// Invalidation is precise: SetRole/DeleteRole clear the role sets holding
// the role (every set for @everyone), SetOverwrites/DeleteChannel clear one
// channel slot in every set, SetMember moves one member to another set.

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
	base   Bits   // @everyone | existing roles, valid when baseOK
	cache  []Bits // by channel slot; 0 = not cached
}

// baseBits returns @everyone | the set's existing roles.
func (s *roleSet) baseBits(e *Engine) Bits {
	if s.baseOK {
		return s.base
	}
	p := e.roles[e.guildID]
	for _, r := range s.roles {
		p |= e.roles[r]
	}
	s.base, s.baseOK = p, true
	return p
}

// fill computes and stores the entry of set in ch.
func (e *Engine) fill(set *roleSet, ch *channel) Bits {
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
	if int(ch.idx) >= len(set.cache) {
		n := max(int(e.nextIdx), int(ch.idx)+1)
		set.cache = append(set.cache, make([]Bits, n-len(set.cache))...)
	}
	set.cache[ch.idx] = v
	e.entries++
	return v
}

// intern returns the roleSet for a member's role list, adding a reference.
func (e *Engine) intern(roles []snowflake.ID) *roleSet {
	norm := e.normalize(roles)
	e.keyBuf = roleKey(e.keyBuf[:0], norm)
	if s, ok := e.sets[string(e.keyBuf)]; ok {
		s.refs++
		return s
	}
	s := &roleSet{key: string(e.keyBuf), roles: slices.Clone(norm), refs: 1}
	e.sets[s.key] = s
	return s
}

// release drops a reference and forgets the set when no member holds it.
func (e *Engine) release(s *roleSet) {
	s.refs--
	if s.refs > 0 {
		return
	}
	e.clearSet(s)
	delete(e.sets, s.key)
}

// clearSet drops every entry of a set.
func (e *Engine) clearSet(s *roleSet) {
	for _, v := range s.cache {
		if v != 0 {
			e.entries--
		}
	}
	s.cache = nil
	s.baseOK = false
}

// invalidateRole clears every set that a change of roleID can affect.
func (e *Engine) invalidateRole(roleID snowflake.ID) {
	everyone := roleID == e.guildID
	for _, s := range e.sets {
		if everyone {
			e.clearSet(s)
			continue
		}
		if _, ok := slices.BinarySearch(s.roles, roleID); ok {
			e.clearSet(s)
		}
	}
}

// invalidateChannel clears one channel slot in every set.
func (e *Engine) invalidateChannel(ch *channel) {
	for _, s := range e.sets {
		if int(ch.idx) < len(s.cache) && s.cache[ch.idx] != 0 {
			s.cache[ch.idx] = 0
			e.entries--
		}
	}
}
