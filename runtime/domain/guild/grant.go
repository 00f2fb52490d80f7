package guild

import (
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// mayGrant asks the guild's engine whether g may happen now; every action
// that hands out permission bits or changes who holds a role goes through
// it (overwrites, role create/edit/delete/positions, role assignment, bot
// installs). A refusal is ErrMissingPermissions, Discord's 50013.
func (a *Actor) mayGrant(g permissions.Grant) error {
	if err := a.engine.MayGrant(g, a.svc.cfg.Now()); err != nil {
		return fmt.Errorf("guild %d: %w: %w", a.id, ErrMissingPermissions, err)
	}
	return nil
}

// assignGrant is the grant of adding or removing roles on a member:
// MANAGE_ROLES and each role below the actor's highest. A managed (bot)
// role is never assigned or removed by hand: its bits were granted by an
// install, which is the only way to hand them out.
func (a *Actor) assignGrant(userID snowflake.ID, roles []snowflake.ID) error {
	if err := a.mayGrant(permissions.Grant{Actor: userID, Need: permissions.ManageRoles, Roles: roles}); err != nil {
		return err
	}
	for _, id := range roles {
		if r, ok := a.roles[id]; ok && r.Managed {
			return fmt.Errorf("role %d is managed by an integration: %w", id, ErrMissingPermissions)
		}
	}
	return nil
}

// overwriteGrant is the grant of replacing a channel's overwrites before
// with after: MANAGE_ROLES in channelID, and every bit that changes held in
// the overwrite rule's scope (permissions.Engine.OverwriteScope) given the
// channel's parent category parentID. A new channel passes its parent
// category (or 0, the guild) as channelID and parentID: its own overwrites
// do not exist yet and cannot vouch for themselves.
func (a *Actor) overwriteGrant(userID, channelID, parentID snowflake.ID, before, after []store.Overwrite) error {
	return a.mayGrant(permissions.Grant{
		Actor:      userID,
		Channel:    channelID,
		Need:       permissions.ManageRoles,
		Bits:       permissions.ChangedBits(engineOverwrites(before), engineOverwrites(after)),
		Overwrites: true,
		Parent:     parentID,
	})
}

// setRole applies a role, already written through, to the actor's state
// and its engine (bits and the position the hierarchy reads).
func (a *Actor) setRole(r store.Role) {
	if old, ok := a.roles[r.ID]; ok {
		*old = r
	} else {
		a.roles[r.ID] = &r
	}
	a.engine.SetRole(r.ID, permissions.Bits(r.Permissions))
	a.engine.SetRolePosition(r.ID, r.Position)
}

// decide returns userID's permissions in channelID from the cached engine
// for a fan-out or read decision; a sample of them is recomputed from
// scratch from the actor's own state (roles, overwrites, members, owner)
// and a disagreement is counted and logged by the shadow check.
func (a *Actor) decide(d permissions.Decision, userID, channelID snowflake.ID) permissions.Bits {
	if c := a.channels[channelID]; c != nil && c.Thread != nil {
		// A thread is decided from its parent (sampled there) with the
		// thread rules applied.
		return a.threadPerms(d, userID, c)
	}
	now := a.svc.cfg.Now()
	p := a.engine.Channel(userID, channelID, now)
	if a.sampler.Sample() {
		a.svc.shadow.Record(d, a.id, userID, channelID, p, a.recompute(userID, channelID, now))
	}
	return p
}

// recompute is permissions.Compute over the actor's state: what the engine
// must answer for userID in channelID.
func (a *Actor) recompute(userID, channelID snowflake.ID, now time.Time) permissions.Bits {
	m, c := a.members[userID], a.channels[channelID]
	if m == nil || c == nil {
		return 0
	}
	return permissions.Compute(permissions.Inputs{
		GuildID: a.id,
		OwnerID: a.guild.OwnerID,
		Member:  engineMember(*m),
		Role: func(id snowflake.ID) (permissions.Bits, bool) {
			r, ok := a.roles[id]
			if !ok {
				return 0, false
			}
			return permissions.Bits(r.Permissions), true
		},
		Overwrites: engineOverwrites(c.Overwrites),
		Now:        now,
	})
}
