package guild

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// RoleSpec creates or patches a role; nil fields take defaults (create) or
// stay (patch).
type RoleSpec struct {
	Name        *string
	Permissions *uint64
	Color       *int
	// SecondaryColor and TertiaryColor set the role's gradient colours;
	// a negative value clears one.
	SecondaryColor *int
	TertiaryColor  *int
	Hoist          *bool
	Mentionable    *bool
}

// bits returns the permissions a role holding cur has after the spec.
func (spec RoleSpec) bits(cur uint64) permissions.Bits {
	if spec.Permissions != nil {
		cur = *spec.Permissions & uint64(permissions.All)
	}
	return permissions.Bits(cur)
}

// applyRoleSpec validates spec and applies it to r; the caller checks the
// grant of the resulting bits.
func (a *Actor) applyRoleSpec(r *store.Role, spec RoleSpec) error {
	if spec.Name != nil {
		if n := utf8.RuneCountInString(*spec.Name); n < 1 || n > 100 {
			return fmt.Errorf("role name length %d: %w", n, ErrInvalid)
		}
		r.Name = *spec.Name
	}
	r.Permissions = uint64(spec.bits(r.Permissions))
	if spec.Color != nil {
		r.Color = *spec.Color
	}
	applyGradient(r, spec)
	if spec.Hoist != nil {
		r.Hoist = *spec.Hoist
	}
	if spec.Mentionable != nil {
		r.Mentionable = *spec.Mentionable
	}
	return nil
}

// Roles is the roles seam of a Service (Service.Roles): creating,
// changing, deleting and moving a guild's roles, and listing them. It
// holds the host, whose guild actors keep the roles. Giving a member a
// role is the members seam's (Members.AddRole); a bot's managed role is
// the bots seam's.
type Roles struct {
	s *Service
}

// Create creates a role at position 1 (right above @everyone, the
// others move up one), needing MANAGE_ROLES and every bit it carries; it
// fans out GUILD_ROLE_CREATE.
func (rl *Roles) Create(ctx context.Context, userID, guildID snowflake.ID, spec RoleSpec) (store.Role, error) {
	s := rl.s
	id, err := s.deps.IDs.Next()
	if err != nil {
		return store.Role{}, fmt.Errorf("create role: %w: %w", ErrUnavailable, err)
	}
	var out store.Role
	err = s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		r := store.Role{ID: id, GuildID: a.id, Name: "new role", Position: 1}
		if err := a.mayGrant(permissions.Grant{Actor: userID, Need: permissions.ManageRoles, Bits: spec.bits(0)}); err != nil {
			return err
		}
		if err := a.applyRoleSpec(&r, spec); err != nil {
			return err
		}
		if err := a.insertRole(ctx, r, "create role"); err != nil {
			return err
		}
		out = r
		a.rolesChanged(ctx)
		return nil
	})
	return out, err
}

// insertRole writes a new role at position 1 through, moving every other
// role (not @everyone) up one, and fans out GUILD_ROLE_CREATE.
func (a *Actor) insertRole(ctx context.Context, r store.Role, op string) error {
	r.Position = 1
	for _, o := range a.sortedRoles() {
		if o.ID == a.id || o.Position < 1 {
			continue
		}
		o.Position++
		if err := a.svc.deps.Store.PutRole(ctx, o); err != nil {
			return storeErr(op, err)
		}
		a.setRole(o)
	}
	if err := a.svc.deps.Store.PutRole(ctx, r); err != nil {
		return storeErr(op, err)
	}
	a.setRole(r)
	a.broadcast(ctx, "GUILD_ROLE_CREATE", wire.RoleEvent{GuildID: a.id, Role: wire.RoleFrom(r)}, IntentGuilds)
	return nil
}

// Modify patches a role: MANAGE_ROLES, every permission bit that
// changes held by the caller, and the role below the caller's highest
// (@everyone ranks below all; the owner is exempt). A permission change
// re-checks what every session can see.
func (rl *Roles) Modify(ctx context.Context, userID, guildID, roleID snowflake.ID, spec RoleSpec) (store.Role, error) {
	s := rl.s
	var out store.Role
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		old, ok := a.roles[roleID]
		if !ok {
			return fmt.Errorf("role %d: %w", roleID, ErrUnknownRole)
		}
		if err := a.mayGrant(permissions.Grant{Actor: userID, Need: permissions.ManageRoles,
			Bits: spec.bits(old.Permissions) ^ permissions.Bits(old.Permissions), Roles: []snowflake.ID{roleID}}); err != nil {
			return err
		}
		r := *old
		if err := a.applyRoleSpec(&r, spec); err != nil {
			return err
		}
		if roleID == a.id {
			r.Name = "@everyone"
		}
		if err := a.svc.deps.Store.PutRole(ctx, r); err != nil {
			return storeErr("modify role", err)
		}
		permsChanged := r.Permissions != old.Permissions
		a.setRole(r)
		out = r
		a.broadcast(ctx, "GUILD_ROLE_UPDATE", wire.RoleEvent{GuildID: a.id, Role: wire.RoleFrom(r)}, IntentGuilds)
		a.rolesChanged(ctx)
		if permsChanged {
			a.syncVisibility(ctx, nil, nil, 0)
		}
		return nil
	})
	return out, err
}

// Delete deletes a role (not @everyone) under the same rules as
// ModifyRole; members lose it (each written through) and sessions are told
// what they can no longer see.
func (rl *Roles) Delete(ctx context.Context, userID, guildID, roleID snowflake.ID) error {
	s := rl.s
	return s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		if _, ok := a.roles[roleID]; !ok {
			return fmt.Errorf("role %d: %w", roleID, ErrUnknownRole)
		}
		if roleID == a.id {
			return fmt.Errorf("delete @everyone: %w", ErrInvalid)
		}
		if err := a.mayGrant(permissions.Grant{Actor: userID, Need: permissions.ManageRoles, Roles: []snowflake.ID{roleID}}); err != nil {
			return err
		}
		for _, m := range a.members {
			if !slices.Contains(m.Roles, roleID) {
				continue
			}
			nm := *m
			nm.Roles = slices.DeleteFunc(slices.Clone(m.Roles), func(id snowflake.ID) bool { return id == roleID })
			if err := a.svc.deps.Store.PutMember(ctx, nm); err != nil {
				return storeErr("delete role", err)
			}
			*m = nm
			a.engine.SetMember(engineMember(nm))
		}
		for _, c := range a.channels {
			if !slices.ContainsFunc(c.Overwrites, func(o store.Overwrite) bool { return o.ID == roleID && o.Type == store.OverwriteRole }) {
				continue
			}
			nc := cloneChannel(*c)
			nc.Overwrites = slices.DeleteFunc(nc.Overwrites, func(o store.Overwrite) bool { return o.ID == roleID && o.Type == store.OverwriteRole })
			if err := a.putChannel(ctx, nc); err != nil {
				return err
			}
		}
		if err := a.svc.deps.Store.DeleteRole(ctx, a.id, roleID); err != nil {
			return storeErr("delete role", err)
		}
		delete(a.roles, roleID)
		a.engine.DeleteRole(roleID)
		a.broadcast(ctx, "GUILD_ROLE_DELETE", wire.RoleDelete{GuildID: a.id, RoleID: roleID}, IntentGuilds)
		a.syncVisibility(ctx, nil, nil, 0)
		return nil
	})
}

// RoleMove is one entry of ModifyRolePositions.
type RoleMove struct {
	ID       snowflake.ID
	Position int
}

// ModifyPositions moves roles (MANAGE_ROLES; each moved role, before
// and after, strictly below the caller's highest role unless the caller
// owns the guild; @everyone never moves). The moved roles land at the
// positions asked for, the others keep their order around them, and
// positions are renumbered 1..n; each role whose position changed is
// written through and fanned out as GUILD_ROLE_UPDATE. It returns every
// role by position.
func (rl *Roles) ModifyPositions(ctx context.Context, userID, guildID snowflake.ID, moves []RoleMove) ([]store.Role, error) {
	s := rl.s
	var out []store.Role
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		g := permissions.Grant{Actor: userID, Need: permissions.ManageRoles}
		target := make(map[snowflake.ID]int, len(moves))
		for _, mv := range moves {
			if _, ok := a.roles[mv.ID]; !ok {
				return fmt.Errorf("role %d: %w", mv.ID, ErrUnknownRole)
			}
			if _, dup := target[mv.ID]; dup {
				return fmt.Errorf("role %d moved twice: %w", mv.ID, ErrInvalid)
			}
			pos := max(mv.Position, 1)
			target[mv.ID] = pos
			g.Moves = append(g.Moves, permissions.Move{Role: mv.ID, Position: pos})
		}
		if err := a.mayGrant(g); err != nil {
			return err
		}
		var order, moved []store.Role
		for _, r := range a.sortedRoles() {
			switch _, ok := target[r.ID]; {
			case r.ID == a.id:
			case ok:
				moved = append(moved, r)
			default:
				order = append(order, r)
			}
		}
		slices.SortStableFunc(moved, func(x, y store.Role) int { return target[x.ID] - target[y.ID] })
		for _, r := range moved {
			i := min(target[r.ID]-1, len(order))
			order = slices.Insert(order, i, r)
		}
		// Renumbering also moves roles nobody asked to move (across gaps
		// left by deleted roles), so the final order is checked again: a
		// moved role must end below the caller's highest role there too.
		final := permissions.Grant{Actor: userID, Need: permissions.ManageRoles}
		for i, r := range order {
			a.engine.SetRolePosition(r.ID, i+1)
			if _, ok := target[r.ID]; ok {
				final.Moves = append(final.Moves, permissions.Move{Role: r.ID, Position: i + 1})
			}
		}
		err := a.mayGrant(final)
		for _, r := range order {
			a.engine.SetRolePosition(r.ID, r.Position)
		}
		if err != nil {
			return err
		}
		for i, r := range order {
			if r.Position == i+1 {
				continue
			}
			r.Position = i + 1
			if err := a.svc.deps.Store.PutRole(ctx, r); err != nil {
				return storeErr("modify role positions", err)
			}
			a.setRole(r)
			a.broadcast(ctx, "GUILD_ROLE_UPDATE", wire.RoleEvent{GuildID: a.id, Role: wire.RoleFrom(r)}, IntentGuilds)
		}
		a.rolesChanged(ctx)
		out = a.sortedRoles()
		return nil
	})
	return out, err
}
