package permissions

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Overwrite is one channel permission overwrite. ID is a role id (Member
// false; the guild id means @everyone) or a user id (Member true).
type Overwrite struct {
	ID     snowflake.ID
	Member bool // false = role overwrite
	Allow  Bits
	Deny   Bits
}

// Member is what the engine needs to know about a guild member.
type Member struct {
	UserID snowflake.ID
	// Roles may list the guild id (@everyone, always implied), duplicates
	// and roles that do not exist; those are ignored.
	Roles []snowflake.ID
	// TimeoutUntil is communication_disabled_until; zero means none.
	TimeoutUntil time.Time
}

// CacheStats counts Channel lookups since the engine was made.
type CacheStats struct {
	Hits    uint64 // Channel calls answered from the cache
	Misses  uint64 // Channel calls that computed and stored an entry
	Entries int    // entries held now
}

// allowDeny is one overwrite's pair of bitfields.
type allowDeny struct{ allow, deny Bits }

// channel holds one channel's overwrites and its cache column.
type channel struct {
	// cache holds, by role set id, the result of steps 2-4 (see cache.go);
	// 0 = not cached.
	cache       []Bits
	hasEveryone bool
	everyone    allowDeny
	roles       map[snowflake.ID]allowDeny // role overwrites, @everyone excluded
	members     map[snowflake.ID]allowDeny // member overwrites by user id
}

// member is the engine's record of one member, stored by value in the
// members map so a lookup touches one slot.
type member struct {
	set int32 // role set id, see cache.go
	// overwrites counts the channels with a member overwrite for this user,
	// so members without any skip that lookup.
	overwrites int32
	hasTimeout bool
	timeout    time.Time
}

// Engine holds one guild's permission inputs and its cache. It is not safe
// for concurrent use: the guild actor owns it.
//
// Inputs may arrive in any order: overwrites may name roles or users that
// are not (yet) known, members may list roles that do not exist. A role
// takes part in a member's permissions (base and overwrites) only while it
// exists, so DeleteRole removes it from every member's role set logically;
// a later SetRole with the same id brings it back for members still listing
// it (snowflakes are never reused, so this does not happen in practice).
type Engine struct {
	guildID snowflake.ID
	ownerID snowflake.ID

	roles map[snowflake.ID]Bits // includes @everyone (id == guildID) once set
	// positions are the roles' positions for the hierarchy (grant.go).
	positions map[snowflake.ID]int
	channels  map[snowflake.ID]*channel
	members   map[snowflake.ID]member
	// memberOverwrites counts channels with an overwrite per user id, also
	// for users who are not members (yet).
	memberOverwrites map[snowflake.ID]int32

	// cache
	setIDs   map[string]int32 // interned role sets by key
	sets     []*roleSet       // by id; nil = free
	freeSets []int32
	hits     uint64
	misses   uint64
	entries  int
	keyBuf   []byte
	rolesBuf []snowflake.ID

	// journal, when set, receives every change (journal.go).
	journal func(Change)
}

// NewEngine returns an empty engine for a guild. @everyone has no
// permissions until SetRole(guildID, ...).
func NewEngine(guildID, ownerID snowflake.ID) *Engine {
	return &Engine{
		guildID:          guildID,
		ownerID:          ownerID,
		roles:            make(map[snowflake.ID]Bits),
		channels:         make(map[snowflake.ID]*channel),
		members:          make(map[snowflake.ID]member),
		memberOverwrites: make(map[snowflake.ID]int32),
		setIDs:           make(map[string]int32),
	}
}

// SetOwner changes the guild owner. Cached entries do not depend on it.
func (e *Engine) SetOwner(userID snowflake.ID) {
	e.ownerID = userID
	e.record(Change{Op: OpOwner, ID: userID})
}

// SetRole creates or updates a role's permissions. roleID == guild id is
// @everyone. It invalidates the cached entries of every role set holding
// the role (all of them for @everyone).
func (e *Engine) SetRole(roleID snowflake.ID, bits Bits) {
	e.record(Change{Op: OpRole, ID: roleID, Bits: bits})
	if old, ok := e.roles[roleID]; ok && old == bits {
		return
	}
	e.roles[roleID] = bits
	e.invalidateRole(roleID)
}

// DeleteRole deletes a role; members listing it no longer get its bits nor
// its channel overwrites. Deleting @everyone leaves it with no permissions.
func (e *Engine) DeleteRole(roleID snowflake.ID) {
	e.record(Change{Op: OpDeleteRole, ID: roleID})
	if _, ok := e.roles[roleID]; !ok {
		return
	}
	delete(e.roles, roleID)
	delete(e.positions, roleID)
	e.invalidateRole(roleID)
}

// SetOverwrites replaces a channel's overwrites and registers the channel
// if it is new; ows may be empty. When ows holds several overwrites for the
// same target, the last one wins. It invalidates that channel only.
func (e *Engine) SetOverwrites(channelID snowflake.ID, ows []Overwrite) {
	e.record(Change{Op: OpOverwrites, ID: channelID, Overwrites: ows})
	ch := e.channels[channelID]
	if ch == nil {
		ch = &channel{}
		e.channels[channelID] = ch
	} else {
		e.invalidateChannel(ch)
		for uid := range ch.members {
			e.addMemberOverwrites(uid, -1)
		}
	}
	ch.hasEveryone = false
	ch.everyone = allowDeny{}
	ch.roles = nil
	ch.members = nil
	for _, ow := range ows {
		ad := allowDeny{allow: ow.Allow, deny: ow.Deny}
		switch {
		case ow.Member:
			if ch.members == nil {
				ch.members = make(map[snowflake.ID]allowDeny)
			}
			ch.members[ow.ID] = ad
		case ow.ID == e.guildID:
			ch.hasEveryone = true
			ch.everyone = ad
		default:
			if ch.roles == nil {
				ch.roles = make(map[snowflake.ID]allowDeny)
			}
			ch.roles[ow.ID] = ad
		}
	}
	for uid := range ch.members {
		e.addMemberOverwrites(uid, 1)
	}
}

// DeleteChannel forgets a channel and its cached entries.
func (e *Engine) DeleteChannel(channelID snowflake.ID) {
	e.record(Change{Op: OpDeleteChannel, ID: channelID})
	ch := e.channels[channelID]
	if ch == nil {
		return
	}
	e.invalidateChannel(ch)
	for uid := range ch.members {
		e.addMemberOverwrites(uid, -1)
	}
	delete(e.channels, channelID)
}

// SetMember adds or replaces a member. Only that member's lookups change:
// they move to the cache entries of their new role set.
func (e *Engine) SetMember(m Member) {
	if e.journal != nil {
		jm := m
		jm.Roles = slices.Clone(m.Roles)
		e.record(Change{Op: OpMember, ID: m.UserID, Member: &jm})
	}
	old, ok := e.members[m.UserID]
	set := e.intern(m.Roles)
	if ok {
		e.release(old.set)
	}
	e.members[m.UserID] = member{
		set:        set,
		timeout:    m.TimeoutUntil,
		hasTimeout: !m.TimeoutUntil.IsZero(),
		overwrites: e.memberOverwrites[m.UserID],
	}
}

// DeleteMember forgets a member.
func (e *Engine) DeleteMember(userID snowflake.ID) {
	e.record(Change{Op: OpDeleteMember, ID: userID})
	m, ok := e.members[userID]
	if !ok {
		return
	}
	e.release(m.set)
	delete(e.members, userID)
}

// Base returns the member's guild-level permissions at now: All for the
// owner and administrators, @everyone | roles otherwise, cut to
// TimeoutAllowed while a timeout runs. It is 0 for non-members.
func (e *Engine) Base(userID snowflake.ID, now time.Time) Bits {
	m, ok := e.members[userID]
	if !ok {
		return 0
	}
	if userID == e.ownerID {
		return All
	}
	base := e.sets[m.set].baseBits(e)
	if base&Administrator != 0 {
		return All
	}
	if m.hasTimeout && m.timeout.After(now) {
		base &= TimeoutAllowed
	}
	return base
}

// Channel returns the member's permissions in a channel at now, from the
// cache when it can. It is 0 for unknown members and channels; the owner
// too is unknown until SetMember.
func (e *Engine) Channel(userID, channelID snowflake.ID, now time.Time) Bits {
	m, ok := e.members[userID]
	if !ok {
		return 0
	}
	ch := e.channels[channelID]
	if ch == nil {
		return 0
	}
	if userID == e.ownerID {
		return All
	}
	var p Bits
	if int(m.set) < len(ch.cache) && ch.cache[m.set] != 0 {
		e.hits++
		p = ch.cache[m.set]
	} else {
		e.misses++
		p = e.fill(m.set, ch)
	}
	if p == cachedAll {
		return All
	}
	p &^= cachedFlag
	if m.overwrites != 0 {
		if ow, ok := ch.members[userID]; ok {
			p = p&^ow.deny | ow.allow
		}
	}
	p = implicit(p)
	if m.hasTimeout && m.timeout.After(now) {
		p &= TimeoutAllowed
	}
	return p
}

// ChannelUncached computes what Channel returns from the inputs alone,
// touching no cache. It is the shadow check for the cached path.
func (e *Engine) ChannelUncached(userID, channelID snowflake.ID, now time.Time) Bits {
	m, ok := e.members[userID]
	if !ok {
		return 0
	}
	ch := e.channels[channelID]
	if ch == nil {
		return 0
	}
	if userID == e.ownerID {
		return All
	}
	roles := e.sets[m.set].roles
	p := e.roles[e.guildID]
	for _, r := range roles {
		p |= e.roles[r] // a missing role contributes 0
	}
	if p&Administrator != 0 {
		return All
	}
	if ch.hasEveryone {
		p = p&^ch.everyone.deny | ch.everyone.allow
	}
	if len(ch.roles) != 0 {
		var allow, deny Bits
		for _, r := range roles {
			if _, exists := e.roles[r]; !exists {
				continue
			}
			if ow, ok := ch.roles[r]; ok {
				allow |= ow.allow
				deny |= ow.deny
			}
		}
		p = p&^deny | allow
	}
	if ow, ok := ch.members[userID]; ok {
		p = p&^ow.deny | ow.allow
	}
	p = implicit(p)
	if m.hasTimeout && m.timeout.After(now) {
		p &= TimeoutAllowed
	}
	return p
}

// Stats returns the cache counters.
func (e *Engine) Stats() CacheStats {
	return CacheStats{Hits: e.hits, Misses: e.misses, Entries: e.entries}
}

func (e *Engine) addMemberOverwrites(userID snowflake.ID, d int32) {
	n := e.memberOverwrites[userID] + d
	if n == 0 {
		delete(e.memberOverwrites, userID)
	} else {
		e.memberOverwrites[userID] = n
	}
	if m, ok := e.members[userID]; ok {
		m.overwrites = n
		e.members[userID] = m
	}
}

// roleKey appends the interning key of a sorted, deduplicated role list.
func roleKey(dst []byte, roles []snowflake.ID) []byte {
	for _, r := range roles {
		dst = binary.BigEndian.AppendUint64(dst, uint64(r))
	}
	return dst
}

// normalize sorts and deduplicates roles into buf, dropping @everyone.
func (e *Engine) normalize(roles []snowflake.ID) []snowflake.ID {
	buf := append(e.rolesBuf[:0], roles...)
	slices.Sort(buf)
	buf = slices.Compact(buf)
	if i, ok := slices.BinarySearch(buf, e.guildID); ok {
		buf = slices.Delete(buf, i, i+1)
	}
	e.rolesBuf = buf
	return buf
}
