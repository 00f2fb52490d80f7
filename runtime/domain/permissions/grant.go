package permissions

import (
	"errors"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Granting permissions: one check.
//
// Every action that hands out permission bits or changes who holds them
// (channel overwrites, role creation and edits, role positions, role
// assignment, bot installs) describes itself as a Grant and asks
// Engine.MayGrant, which applies Discord's rules in one place:
//
//   - the owner may do anything, and ADMINISTRATOR holds every bit;
//   - the actor needs the action's own permission (Need: MANAGE_ROLES for
//     overwrites and roles, MANAGE_GUILD for bot installs), in the channel
//     when the grant is about one, else at guild level;
//   - the bits handed out (set or cleared on a role, given to a bot) must
//     all be held by the actor at guild level;
//   - the bits an overwrite edit touches (allowed or denied, added or
//     taken away) must all be held by the actor in the overwrite's
//     reference scope, see below;
//   - every role the action modifies, deletes, assigns or removes must
//     rank strictly below the actor's highest role, and a role may only be
//     moved to a position strictly below it; @everyone never moves, not
//     even for the owner.
//     ADMINISTRATOR does not lift the hierarchy, only ownership does.
//
// Overwrite edits. Discord documents that only permissions the caller has
// in the guild, or in the parent category when the channel has one, can be
// allowed or denied, unless the caller has a MANAGE_ROLES overwrite in the
// channel. We read that as:
//
//   - the reference scope is the parent category (the actor's permissions
//     there, with the category's overwrites) for a channel in one, else
//     the guild (the actor's base permissions). The channel's own
//     overwrites do not count: a member whose bits come from an overwrite
//     of this channel cannot hand those bits to others or move them
//     around, which is what keeps a channel moderator from widening the
//     channel beyond what the guild or the category gave them;
//   - the exception: when an overwrite of this channel that applies to the
//     actor (the @everyone overwrite, one of their roles', their own)
//     allows MANAGE_ROLES, the channel has explicitly made them its
//     permission manager, and the scope is the channel itself, its
//     overwrites included;
//   - either way the scope is computed from the state before the edit, so
//     an overwrite never vouches for itself: MANAGE_ROLES cannot grant its
//     holder a bit it lacks, through the edited overwrite or any other.
//
// A bit held at guild level but denied to the actor in the channel may
// therefore be allowed to others there; that is Discord's documented
// behaviour, and it hands out nothing the actor could not already use
// elsewhere in the guild.

// Grant describes one permission-granting action for MayGrant.
type Grant struct {
	// Actor is the user performing the action.
	Actor snowflake.ID
	// Channel is the channel whose overwrites change, or the parent
	// category of a channel being created; the actor's permissions are
	// computed in it. 0 means guild level (roles, bot installs, a new
	// channel without a parent).
	Channel snowflake.ID
	// Need is the permission the action itself requires.
	Need Bits
	// Bits are the permission bits handed out or taken away: for
	// overwrites ChangedBits of the old and new lists, for a role the
	// bits that differ between its old and new permissions, for a bot
	// install every bit its role will carry.
	Bits Bits
	// Overwrites marks an edit of Channel's permission overwrites (or the
	// overwrites of a new channel, Channel then being its parent
	// category): Bits are then checked in the reference scope of the
	// overwrite rule instead of where Need is.
	Overwrites bool
	// Parent is Channel's parent category for an overwrite edit, 0 when
	// it has none.
	Parent snowflake.ID
	// Roles are the roles the action modifies, deletes, assigns or
	// removes. @everyone (the guild id) ranks below every role.
	Roles []snowflake.ID
	// Moves are role position changes.
	Moves []Move
}

// Move changes one role's position.
type Move struct {
	Role     snowflake.ID
	Position int
}

// ErrGrant is matched by every *GrantError.
var ErrGrant = errors.New("permissions: grant refused")

// GrantError says why MayGrant refused.
type GrantError struct {
	// Missing are the bits (Need or Bits) the actor lacks; 0 for a
	// hierarchy refusal.
	Missing Bits
	// Role is the role that is not below the actor, for a hierarchy
	// refusal.
	Role snowflake.ID
	// Reason is a short description.
	Reason string
}

// Error describes the refusal.
func (e *GrantError) Error() string {
	if e.Missing != 0 {
		return fmt.Sprintf("permissions: %s: missing %d", e.Reason, e.Missing)
	}
	return fmt.Sprintf("permissions: %s: role %d", e.Reason, e.Role)
}

// Is makes errors.Is(err, ErrGrant) true.
func (e *GrantError) Is(target error) bool { return target == ErrGrant }

// MayGrant reports whether g may happen now: nil, or a *GrantError.
func (e *Engine) MayGrant(g Grant, now time.Time) error {
	if _, ok := e.members[g.Actor]; !ok {
		return &GrantError{Missing: g.Need | g.Bits, Reason: "actor is not a member"}
	}
	for _, mv := range g.Moves {
		if mv.Role == e.guildID {
			return &GrantError{Role: mv.Role, Reason: "@everyone has no position to change"}
		}
	}
	if g.Actor == e.ownerID {
		return nil
	}
	var held Bits
	if g.Channel != 0 {
		held = e.Channel(g.Actor, g.Channel, now)
	} else {
		held = e.Base(g.Actor, now)
	}
	if !held.Has(g.Need) {
		return &GrantError{Missing: g.Need &^ held, Reason: "action needs"}
	}
	if g.Overwrites {
		held = e.OverwriteScope(g.Actor, g.Channel, g.Parent, now)
	}
	if !held.Has(g.Bits) {
		return &GrantError{Missing: g.Bits &^ held, Reason: "may only grant held bits"}
	}
	top := e.Highest(g.Actor)
	for _, r := range g.Roles {
		if r != e.guildID && e.position(r) >= top {
			return &GrantError{Role: r, Reason: "role not below actor's highest role"}
		}
	}
	for _, mv := range g.Moves {
		if e.position(mv.Role) >= top || mv.Position >= top {
			return &GrantError{Role: mv.Role, Reason: "role would not stay below actor's highest role"}
		}
	}
	return nil
}

// OverwriteScope returns the bits userID may allow or deny in the
// overwrites of channelID (whose parent category is parentID, 0 for none):
// everything for the owner and for ADMINISTRATOR; the channel's own
// permissions when one of its overwrites that applies to the user allows
// MANAGE_ROLES; else the permissions in the parent category, or the
// guild-level ones without a parent. See "Overwrite edits" above.
func (e *Engine) OverwriteScope(userID, channelID, parentID snowflake.ID, now time.Time) Bits {
	base := e.Base(userID, now)
	if base == All {
		return All
	}
	if channelID != 0 && e.managesOverwrites(userID, channelID) {
		return e.Channel(userID, channelID, now)
	}
	if parentID != 0 {
		return e.Channel(userID, parentID, now)
	}
	return base
}

// managesOverwrites reports whether an overwrite of channelID that applies
// to userID allows MANAGE_ROLES.
func (e *Engine) managesOverwrites(userID, channelID snowflake.ID) bool {
	m, ok := e.members[userID]
	ch := e.channels[channelID]
	if !ok || ch == nil {
		return false
	}
	if ch.hasEveryone && ch.everyone.allow&ManageRoles != 0 {
		return true
	}
	if ow, ok := ch.members[userID]; ok && ow.allow&ManageRoles != 0 {
		return true
	}
	for _, r := range e.sets[m.set].roles {
		if _, exists := e.roles[r]; !exists {
			continue
		}
		if ow, ok := ch.roles[r]; ok && ow.allow&ManageRoles != 0 {
			return true
		}
	}
	return false
}

// SetRolePosition records a role's position for the hierarchy checks.
// Positions do not affect computed permissions, so nothing is invalidated.
func (e *Engine) SetRolePosition(roleID snowflake.ID, position int) {
	if e.positions == nil {
		e.positions = make(map[snowflake.ID]int)
	}
	e.positions[roleID] = position
}

// position is a role's position; @everyone and unknown roles are 0.
func (e *Engine) position(roleID snowflake.ID) int {
	if roleID == e.guildID {
		return 0
	}
	return e.positions[roleID]
}

// Highest returns the position of the member's highest existing role: 0
// for a member with only @everyone, -1 for a non-member.
func (e *Engine) Highest(userID snowflake.ID) int {
	m, ok := e.members[userID]
	if !ok {
		return -1
	}
	top := 0
	for _, r := range e.sets[m.set].roles {
		if _, exists := e.roles[r]; exists {
			top = max(top, e.positions[r])
		}
	}
	return top
}

// Outranks reports whether actor may act on something ranked at position:
// the owner always, anyone else only strictly below their highest role.
func (e *Engine) Outranks(actorID snowflake.ID, position int) bool {
	if _, ok := e.members[actorID]; !ok {
		return false
	}
	return actorID == e.ownerID || e.Highest(actorID) > position
}

// ChangedBits returns every bit whose allow or deny differs between two
// overwrite lists, target by target: a new overwrite changes all its
// bits, a removed one all the bits it had. These are the bits an actor
// must hold to replace before with after.
func ChangedBits(before, after []Overwrite) Bits {
	old := make(map[snowflake.ID]allowDeny, len(before))
	for _, o := range before {
		old[o.ID] = allowDeny{allow: o.Allow, deny: o.Deny}
	}
	var changed Bits
	seen := make(map[snowflake.ID]bool, len(after))
	for _, o := range after {
		seen[o.ID] = true
		was := old[o.ID]
		changed |= (was.allow ^ o.Allow) | (was.deny ^ o.Deny)
	}
	for id, was := range old {
		if !seen[id] {
			changed |= was.allow | was.deny
		}
	}
	return changed
}
