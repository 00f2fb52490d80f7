package guild

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/permissions"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/wire"
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

// checkGrant refuses to hand out bits the actor does not hold, as Discord
// does (the owner and administrators hold all).
func (a *Actor) checkGrant(userID snowflake.ID, bits uint64) error {
	have := a.engine.Base(userID, a.svc.cfg.Now())
	if !have.Has(permissions.Bits(bits)) {
		return fmt.Errorf("grant %d: %w", permissions.Bits(bits)&^have, ErrMissingPermissions)
	}
	return nil
}

func (a *Actor) applyRoleSpec(userID snowflake.ID, r *store.Role, spec RoleSpec) error {
	if spec.Name != nil {
		if n := utf8.RuneCountInString(*spec.Name); n < 1 || n > 100 {
			return fmt.Errorf("role name length %d: %w", n, ErrInvalid)
		}
		r.Name = *spec.Name
	}
	if spec.Permissions != nil {
		if err := a.checkGrant(userID, *spec.Permissions&^r.Permissions); err != nil {
			return err
		}
		r.Permissions = *spec.Permissions & uint64(permissions.All)
	}
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

// CreateRole creates a role at position 1 (right above @everyone, the
// others move up one), needing MANAGE_ROLES; it fans out GUILD_ROLE_CREATE.
func (s *Service) CreateRole(ctx context.Context, userID, guildID snowflake.ID, spec RoleSpec) (store.Role, error) {
	id, err := s.deps.IDs.Next()
	if err != nil {
		return store.Role{}, fmt.Errorf("create role: %w: %w", ErrUnavailable, err)
	}
	var out store.Role
	err = s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.ManageRoles); err != nil {
			return err
		}
		r := store.Role{ID: id, GuildID: a.id, Name: "new role", Position: 1}
		if err := a.applyRoleSpec(userID, &r, spec); err != nil {
			return err
		}
		for _, o := range a.sortedRoles() {
			if o.ID == a.id || o.Position < 1 {
				continue
			}
			o.Position++
			if err := a.svc.deps.Store.PutRole(ctx, o); err != nil {
				return storeErr("create role", err)
			}
			*a.roles[o.ID] = o
		}
		if err := a.svc.deps.Store.PutRole(ctx, r); err != nil {
			return storeErr("create role", err)
		}
		a.roles[r.ID] = &r
		a.engine.SetRole(r.ID, permissions.Bits(r.Permissions))
		out = r
		a.broadcast(ctx, "GUILD_ROLE_CREATE", wire.RoleEvent{GuildID: a.id, Role: wire.RoleFrom(r)}, IntentGuilds)
		a.rolesChanged(ctx)
		return nil
	})
	return out, err
}

// ModifyRole patches a role (MANAGE_ROLES, and the role must sit below the
// caller's highest role unless the caller owns the guild). A permission
// change re-checks what every session can see.
func (s *Service) ModifyRole(ctx context.Context, userID, guildID, roleID snowflake.ID, spec RoleSpec) (store.Role, error) {
	var out store.Role
	err := s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.ManageRoles); err != nil {
			return err
		}
		old, ok := a.roles[roleID]
		if !ok {
			return fmt.Errorf("role %d: %w", roleID, ErrUnknownRole)
		}
		if roleID != a.id && !a.outranks(userID, old.Position) {
			return fmt.Errorf("role %d above caller: %w", roleID, ErrMissingPermissions)
		}
		r := *old
		if err := a.applyRoleSpec(userID, &r, spec); err != nil {
			return err
		}
		if roleID == a.id {
			r.Name = "@everyone"
		}
		if err := a.svc.deps.Store.PutRole(ctx, r); err != nil {
			return storeErr("modify role", err)
		}
		permsChanged := r.Permissions != old.Permissions
		*a.roles[roleID] = r
		out = r
		a.broadcast(ctx, "GUILD_ROLE_UPDATE", wire.RoleEvent{GuildID: a.id, Role: wire.RoleFrom(r)}, IntentGuilds)
		a.rolesChanged(ctx)
		if permsChanged {
			a.engine.SetRole(roleID, permissions.Bits(r.Permissions))
			a.syncVisibility(ctx, nil, nil, 0)
		}
		return nil
	})
	return out, err
}

// DeleteRole deletes a role (not @everyone) under the same rules as
// ModifyRole; members lose it (each written through) and sessions are told
// what they can no longer see.
func (s *Service) DeleteRole(ctx context.Context, userID, guildID, roleID snowflake.ID) error {
	return s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.ManageRoles); err != nil {
			return err
		}
		r, ok := a.roles[roleID]
		if !ok {
			return fmt.Errorf("role %d: %w", roleID, ErrUnknownRole)
		}
		if roleID == a.id {
			return fmt.Errorf("delete @everyone: %w", ErrInvalid)
		}
		if !a.outranks(userID, r.Position) {
			return fmt.Errorf("role %d above caller: %w", roleID, ErrMissingPermissions)
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
