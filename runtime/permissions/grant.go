package permissions

import (
	"errors"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/snowflake"
)

// Granting permissions: one check.
//
// Every action that hands out permission bits or changes who holds them
// (channel overwrites, role creation and edits, role positions, role
// assignment, bot installs) describes itself as a Grant and asks
// Engine.MayGrant, which applies Discord's rules in one place:
//
//   - the owner may do anything;
//   - the actor needs the action's own permission (Need: MANAGE_ROLES for
//     overwrites and roles, MANAGE_GUILD for bot installs), in the channel
//     when the grant is about one, else at guild level;
//   - the bits handed out (allowed or denied in an overwrite, set or
//     cleared on a role, given to a bot) must all be held by the actor
//     there, computed with the actor's own overwrites; ADMINISTRATOR holds
//     every bit;
//   - every role the action modifies, deletes, assigns or removes must
//     rank strictly below the actor's highest role, and a role may only be
//     moved to a position strictly below it; @everyone never moves, not
//     even for the owner.
//     ADMINISTRATOR does not lift the hierarchy, only ownership does.
//
// The check reads the engine's current state, before the action applies,
// so an overwrite can never vouch for itself.

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
