package guild

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Members is the members seam of a Service (Service.Members): joining,
// leaving and kicks, a member's changes and roles, bans, and the member
// reads. It holds the host, whose guild actors keep the members; member
// lists and member requests of the gateway (op 14, op 8) stay on the host,
// session operations the gateway reaches the same way on this node and
// over GuildNode.
type Members struct {
	s *Service
}

// Add makes userID a member (joining through an invite). It reports
// whether the user was new; a new member's gateway sessions are subscribed
// and get GUILD_CREATE, the others GUILD_MEMBER_ADD.
func (mb *Members) Add(ctx context.Context, guildID, userID snowflake.ID) (store.Member, bool, error) {
	s := mb.s
	if _, err := s.User(ctx, userID); err != nil {
		return store.Member{}, false, err
	}
	var out store.Member
	added := false
	err := s.do(ctx, guildID, func(a *Actor) error {
		if m, ok := a.members[userID]; ok {
			out = *m
			return nil
		}
		if err := a.refuseBanned(ctx, userID); err != nil {
			return err
		}
		m := store.Member{GuildID: a.id, UserID: userID, Roles: []snowflake.ID{}, JoinedAt: a.svc.cfg.Now()}
		if err := a.svc.deps.Store.PutMember(ctx, m); err != nil {
			return storeErr("add member", err)
		}
		a.members[userID] = &m
		a.engine.SetMember(engineMember(m))
		out, added = m, true
		a.broadcast(ctx, "GUILD_MEMBER_ADD", wire.MemberEvent{Member: a.wireMember(ctx, m), GuildID: a.id}, IntentGuildMembers)
		a.memberJoined(ctx, m)
		return nil
	})
	if err != nil {
		return store.Member{}, false, err
	}
	if added {
		s.subscribeUser(ctx, userID, guildID)
	}
	return out, added, nil
}

// Remove removes memberID from the guild: a kick (KICK_MEMBERS, the
// target below the caller's highest role, never the owner) or, when
// userID == memberID, leaving (not allowed for the owner). The removed
// user's sessions get GUILD_DELETE and are detached; the others get
// GUILD_MEMBER_REMOVE.
func (mb *Members) Remove(ctx context.Context, userID, guildID, memberID snowflake.ID) error {
	s := mb.s
	return s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		m, ok := a.members[memberID]
		if !ok {
			return fmt.Errorf("member %d: %w", memberID, ErrUnknownMember)
		}
		if memberID == a.guild.OwnerID {
			return fmt.Errorf("remove owner of %d: %w", a.id, ErrMissingPermissions)
		}
		if userID != memberID {
			if err := a.guildPerms(userID, permissions.KickMembers); err != nil {
				return err
			}
			if !a.outranks(userID, a.highest(memberID)) {
				return fmt.Errorf("kick %d above caller: %w", memberID, ErrMissingPermissions)
			}
		}
		if err := a.dropMember(ctx, m, "remove member"); err != nil {
			return err
		}
		a.memberLeft(ctx, memberID)
		return nil
	})
}

// dropMember deletes m from the store, then from the actor: its slowmode
// entries go, its own sessions get GUILD_DELETE and are detached, and the
// others get GUILD_MEMBER_REMOVE. op names the operation in a store error.
func (a *Actor) dropMember(ctx context.Context, m *store.Member, op string) error {
	if err := a.svc.deps.Store.DeleteMember(ctx, a.id, m.UserID); err != nil {
		return storeErr(op, err)
	}
	gone := *m
	a.voiceMemberGone(ctx, gone.UserID)
	delete(a.members, gone.UserID)
	a.engine.DeleteMember(gone.UserID)
	for k := range a.slow {
		if k.user == gone.UserID {
			delete(a.slow, k)
		}
	}
	for _, sub := range a.sortedSubs() {
		if sub.s.UserID == gone.UserID {
			a.sendTo(ctx, sub.s, "GUILD_DELETE", wire.UnavailableGuild{ID: a.id})
			a.removeSub(sub.s.ID)
			a.svc.detach(sub.s.ID, a.id)
		}
	}
	user := a.wireMember(ctx, gone).User
	a.broadcast(ctx, "GUILD_MEMBER_REMOVE", wire.MemberRemove{GuildID: a.id, User: *user}, IntentGuildMembers)
	return nil
}

// MemberPatch changes a member; nil fields stay. A zero
// CommunicationDisabledUntil clears a timeout.
type MemberPatch struct {
	Nick                       *string
	Roles                      *[]snowflake.ID
	CommunicationDisabledUntil *time.Time
}

// Modify patches a member: nick (CHANGE_NICKNAME for oneself,
// MANAGE_NICKNAMES otherwise), roles (the grant check: MANAGE_ROLES, each
// added or removed role below the caller's highest) and timeout (MODERATE_MEMBERS, not on
// the owner or administrators, at most 28 days).
func (mb *Members) Modify(ctx context.Context, userID, guildID, memberID snowflake.ID, p MemberPatch) (store.Member, error) {
	s := mb.s
	var out store.Member
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		old, ok := a.members[memberID]
		if !ok {
			return fmt.Errorf("member %d: %w", memberID, ErrUnknownMember)
		}
		m := *old
		m.Roles = slices.Clone(old.Roles)
		now := a.svc.cfg.Now()
		if p.Nick != nil {
			need := permissions.ManageNicknames
			if userID == memberID {
				need = permissions.ChangeNickname
			}
			if err := a.guildPerms(userID, need); err != nil {
				return err
			}
			if userID != memberID && !a.outranks(userID, a.highest(memberID)) {
				return fmt.Errorf("nick of %d: %w", memberID, ErrMissingPermissions)
			}
			if utf8.RuneCountInString(*p.Nick) > 32 {
				return fmt.Errorf("nick too long: %w", ErrInvalid)
			}
			m.Nick = *p.Nick
		}
		if p.Roles != nil {
			if err := a.mayGrant(permissions.Grant{Actor: userID, Need: permissions.ManageRoles}); err != nil {
				return err
			}
			want := make([]snowflake.ID, 0, len(*p.Roles))
			for _, id := range *p.Roles {
				if id == a.id || slices.Contains(want, id) {
					continue
				}
				if _, ok := a.roles[id]; !ok {
					return fmt.Errorf("role %d: %w", id, ErrUnknownRole)
				}
				want = append(want, id)
			}
			changed := symmetricDiff(m.Roles, want)
			if err := a.assignGrant(userID, changed); err != nil {
				return err
			}
			m.Roles = want
		}
		if p.CommunicationDisabledUntil != nil {
			if err := a.guildPerms(userID, permissions.ModerateMembers); err != nil {
				return err
			}
			until := *p.CommunicationDisabledUntil
			if !until.IsZero() {
				if memberID == a.guild.OwnerID || a.engine.Base(memberID, now).Has(permissions.Administrator) {
					return fmt.Errorf("timeout %d: %w", memberID, ErrMissingPermissions)
				}
				if until.After(now.Add(28 * 24 * time.Hour)) {
					return fmt.Errorf("timeout longer than 28 days: %w", ErrInvalid)
				}
			}
			if !a.outranks(userID, a.highest(memberID)) {
				return fmt.Errorf("timeout %d above caller: %w", memberID, ErrMissingPermissions)
			}
			m.CommunicationDisabledUntil = until
		}
		return a.putMember(ctx, m, &out)
	})
	return out, err
}

// AddRole gives memberID a role (MANAGE_ROLES, role below the
// caller's highest).
func (mb *Members) AddRole(ctx context.Context, userID, guildID, memberID, roleID snowflake.ID) error {
	s := mb.s
	return s.editMemberRoles(ctx, userID, guildID, memberID, roleID, true)
}

// RemoveRole takes a role from memberID under the same rules.
func (mb *Members) RemoveRole(ctx context.Context, userID, guildID, memberID, roleID snowflake.ID) error {
	s := mb.s
	return s.editMemberRoles(ctx, userID, guildID, memberID, roleID, false)
}

func (s *Service) editMemberRoles(ctx context.Context, userID, guildID, memberID, roleID snowflake.ID, add bool) error {
	return s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		if err := a.mayGrant(permissions.Grant{Actor: userID, Need: permissions.ManageRoles}); err != nil {
			return err
		}
		old, ok := a.members[memberID]
		if !ok {
			return fmt.Errorf("member %d: %w", memberID, ErrUnknownMember)
		}
		if _, ok := a.roles[roleID]; !ok || roleID == a.id {
			return fmt.Errorf("role %d: %w", roleID, ErrUnknownRole)
		}
		if err := a.assignGrant(userID, []snowflake.ID{roleID}); err != nil {
			return err
		}
		has := slices.Contains(old.Roles, roleID)
		if has == add {
			return nil
		}
		m := *old
		if add {
			m.Roles = append(slices.Clone(old.Roles), roleID)
		} else {
			m.Roles = slices.DeleteFunc(slices.Clone(old.Roles), func(id snowflake.ID) bool { return id == roleID })
		}
		return a.putMember(ctx, m, nil)
	})
}

// putMember writes a changed member through, applies it, fans out
// GUILD_MEMBER_UPDATE and re-checks that member's channel visibility.
func (a *Actor) putMember(ctx context.Context, m store.Member, out *store.Member) error {
	if err := a.svc.deps.Store.PutMember(ctx, m); err != nil {
		return storeErr("put member", err)
	}
	a.members[m.UserID] = &m
	a.engine.SetMember(engineMember(m))
	if out != nil {
		*out = m
		out.Roles = slices.Clone(m.Roles)
	}
	a.syncVisibility(ctx, nil, nil, m.UserID)
	a.broadcast(ctx, "GUILD_MEMBER_UPDATE", wire.MemberEvent{Member: a.wireMember(ctx, m), GuildID: a.id}, IntentGuildMembers)
	return nil
}

func symmetricDiff(a, b []snowflake.ID) []snowflake.ID {
	var out []snowflake.ID
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
}
