package guild

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Bots is the bots seam of a Service (Service.Bots): installing and
// uninstalling a bot with its managed role, the reads the bot platform
// makes (a guild channel, a user's permissions in it), the managed roles
// left behind by a bot's removal, and shard-aware dispatch to a user's
// sessions. It holds the host, whose guild actors keep the members and
// roles and whose session index finds the sessions.
type Bots struct {
	s *Service
}

// Install makes botUserID a member of guildID holding a managed role
// named name that carries perms, or, when the bot is already a member
// with its managed role, sets that role's permissions to perms. It returns
// the managed role's id. installerID must pass the grant check inside the
// guild, in the same step as the install: MANAGE_GUILD and every bit of
// perms (the owner and administrators hold all).
//
// The managed role is created at position 1, right above @everyone, like
// any new role: the bot outranks only members without roles until a
// manager moves its role up, so it never acts on members ranked above it.
// The bot's effective permissions are then computed by the guild's engine
// like anyone's (its roles and the channel overwrites), so narrowing the
// role or removing the bot takes effect on the next call and event.
func (bt *Bots) Install(ctx context.Context, installerID, guildID, botUserID snowflake.ID, name string, perms permissions.Bits) (snowflake.ID, error) {
	s := bt.s
	if _, err := s.User(ctx, botUserID); err != nil {
		return 0, err
	}
	if n := utf8.RuneCountInString(name); n < 1 || n > 100 {
		return 0, fmt.Errorf("install bot: role name length %d: %w", n, ErrInvalid)
	}
	newRoleID, err := s.deps.IDs.Next()
	if err != nil {
		return 0, fmt.Errorf("install bot: %w: %w", ErrUnavailable, err)
	}
	bits := uint64(perms & permissions.All)
	var roleID snowflake.ID
	added := false
	err = s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(installerID); err != nil {
			return err
		}
		if err := a.mayGrant(permissions.Grant{Actor: installerID, Need: permissions.ManageGuild, Bits: permissions.Bits(bits)}); err != nil {
			return err
		}
		if m, ok := a.members[botUserID]; ok {
			if id, ok := a.managedRole(m); ok {
				roleID = id
				return a.setRolePermissions(ctx, id, bits)
			}
		}
		r := store.Role{ID: newRoleID, GuildID: a.id, Name: name, Position: 1, Permissions: bits, Managed: true}
		if err := a.insertRole(ctx, r, "install bot"); err != nil {
			return err
		}
		roleID = r.ID
		if old, ok := a.members[botUserID]; ok {
			m := *old
			m.Roles = append(slices.Clone(old.Roles), r.ID)
			return a.putMember(ctx, m, nil)
		}
		m := store.Member{GuildID: a.id, UserID: botUserID, Roles: []snowflake.ID{r.ID}, JoinedAt: a.svc.cfg.Now()}
		if err := a.svc.deps.Store.PutMember(ctx, m); err != nil {
			return storeErr("install bot", err)
		}
		a.members[botUserID] = &m
		a.engine.SetMember(engineMember(m))
		added = true
		a.broadcast(ctx, "GUILD_MEMBER_ADD", wire.MemberEvent{Member: a.wireMember(ctx, m), GuildID: a.id}, IntentGuildMembers)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if added {
		s.subscribeUser(ctx, botUserID, guildID)
	}
	return roleID, nil
}

// managedRole returns the managed role a bot member holds.
func (a *Actor) managedRole(m *store.Member) (snowflake.ID, bool) {
	for _, id := range m.Roles {
		if r, ok := a.roles[id]; ok && r.Managed {
			return id, true
		}
	}
	return 0, false
}

// setRolePermissions changes a role's bits, fans out GUILD_ROLE_UPDATE and
// re-checks what every session sees.
func (a *Actor) setRolePermissions(ctx context.Context, roleID snowflake.ID, bits uint64) error {
	old := a.roles[roleID]
	if old.Permissions == bits {
		return nil
	}
	r := *old
	r.Permissions = bits
	if err := a.svc.deps.Store.PutRole(ctx, r); err != nil {
		return storeErr("bot role", err)
	}
	a.setRole(r)
	a.broadcast(ctx, "GUILD_ROLE_UPDATE", wire.RoleEvent{GuildID: a.id, Role: wire.RoleFrom(r)}, IntentGuilds)
	a.syncVisibility(ctx, nil, nil, 0)
	return nil
}

// Uninstall removes the bot member botUserID from guildID and deletes
// the managed roles it held. The bot's sessions get GUILD_DELETE and are
// detached, the others GUILD_MEMBER_REMOVE and GUILD_ROLE_DELETE. A bot
// that is not a member is not an error.
func (bt *Bots) Uninstall(ctx context.Context, guildID, botUserID snowflake.ID) error {
	s := bt.s
	return s.do(ctx, guildID, func(a *Actor) error {
		m, ok := a.members[botUserID]
		if !ok {
			return nil
		}
		var managed []snowflake.ID
		for _, id := range m.Roles {
			if r, ok := a.roles[id]; ok && r.Managed {
				managed = append(managed, id)
			}
		}
		if err := a.dropMember(ctx, m, "uninstall bot"); err != nil {
			return err
		}
		for _, id := range managed {
			if err := a.svc.deps.Store.DeleteRole(ctx, a.id, id); err != nil {
				return storeErr("uninstall bot", err)
			}
			delete(a.roles, id)
			a.engine.DeleteRole(id)
			a.broadcast(ctx, "GUILD_ROLE_DELETE", wire.RoleDelete{GuildID: a.id, RoleID: id}, IntentGuilds)
		}
		return nil
	})
}

// ChannelPermissions returns userID's effective permissions in the guild
// channel channelID, evaluated now by the guild's engine (0 when the user
// cannot see it). A user who is not a member fails with ErrUnknownMember,
// a private channel with ErrUnknownChannel.
func (bt *Bots) ChannelPermissions(ctx context.Context, userID, channelID snowflake.ID) (permissions.Bits, error) {
	s := bt.s
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return 0, err
	}
	if guildID == 0 {
		return 0, fmt.Errorf("channel %d is private: %w", channelID, ErrUnknownChannel)
	}
	var out permissions.Bits
	err = s.do(ctx, guildID, func(a *Actor) error {
		if _, ok := a.members[userID]; !ok {
			return fmt.Errorf("user %d in guild %d: %w", userID, a.id, ErrUnknownMember)
		}
		if _, ok := a.channels[channelID]; !ok {
			return fmt.Errorf("channel %d: %w", channelID, ErrUnknownChannel)
		}
		out = a.decide(permissions.DecisionRead, userID, channelID)
		return nil
	})
	return out, err
}

// GuildChannel returns a guild channel as the wire object a bot sees
// (no viewer filtering); private channels fail with ErrUnknownChannel.
func (bt *Bots) GuildChannel(ctx context.Context, channelID snowflake.ID) (wire.Channel, error) {
	s := bt.s
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return wire.Channel{}, err
	}
	if guildID == 0 {
		return wire.Channel{}, fmt.Errorf("channel %d is private: %w", channelID, ErrUnknownChannel)
	}
	var out wire.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		c, ok := a.channels[channelID]
		if !ok {
			return fmt.Errorf("channel %d: %w", channelID, ErrUnknownChannel)
		}
		out = s.Private.WireChannel(ctx, cloneChannel(*c), 0)
		return nil
	})
	return out, err
}

// DispatchToUserShard sends one dispatch to the subscribed sessions of
// userID that carry guildID: a sharded session only when its shard is
// (guildID >> 22) % shard count; guildID 0 (a DM) goes to shard 0, as
// Discord routes DMs. It returns how many sessions it was sent to.
func (bt *Bots) DispatchToUserShard(ctx context.Context, userID, guildID snowflake.ID, eventType string, payload json.RawMessage) int {
	s := bt.s
	byNode := map[string][]event.Target{}
	n := 0
	for _, sess := range s.userSessions(ctx, userID) {
		if !onShard(sess, guildID) {
			continue
		}
		byNode[sess.Node] = append(byNode[sess.Node], event.Target{Session: sess.ID})
		n++
	}
	for node, targets := range byNode {
		s.deps.Sink.Deliver(ctx, node, event.Batch{Type: eventType, Payloads: []json.RawMessage{payload}, Targets: targets})
	}
	return n
}

// UserSessions returns the subscribed gateway sessions of userID (for
// closing a bot's sessions after its token was reset).
func (bt *Bots) UserSessions(userID snowflake.ID) []event.Session {
	s := bt.s
	return s.localUserSessions(userID)
}

// DeleteOrphanManagedRoles deletes the managed roles of guildID that no
// member holds any more: a bot's role after the bot was kicked or left.
// It fans out GUILD_ROLE_DELETE for each.
func (bt *Bots) DeleteOrphanManagedRoles(ctx context.Context, guildID snowflake.ID) error {
	s := bt.s
	return s.do(ctx, guildID, func(a *Actor) error {
		held := map[snowflake.ID]bool{}
		for _, m := range a.members {
			for _, id := range m.Roles {
				held[id] = true
			}
		}
		for id, r := range a.roles {
			if !r.Managed || held[id] {
				continue
			}
			if err := a.svc.deps.Store.DeleteRole(ctx, a.id, id); err != nil {
				return storeErr("delete managed role", err)
			}
			delete(a.roles, id)
			a.engine.DeleteRole(id)
			a.broadcast(ctx, "GUILD_ROLE_DELETE", wire.RoleDelete{GuildID: a.id, RoleID: id}, IntentGuilds)
		}
		return nil
	})
}

// AppMentions are the mentions an application's message may make
// (appMentions).
type AppMentions struct {
	Everyone bool
	Users    []snowflake.ID
	Roles    []snowflake.ID
}

// appMentions decides which of the mentions an application's message
// (an interaction response or followup, authored by the bot user
// botUserID) makes in channelID, as authorizeSend decides them for a
// member's send: users only when they can see the channel (a hidden
// channel never leaks through a mention), roles that exist and are
// mentionable, and @everyone and unmentionable roles only when the bot is
// a member holding MENTION_EVERYONE there. It checks no send permission:
// the interaction already allows the answer, and an application that is
// not a member (or cannot see the channel) still answers, without those
// mentions (CheckApp).
func (a *Actor) appMentions(botUserID, channelID snowflake.ID, everyone bool, users, roles []snowflake.ID) (AppMentions, error) {
	out := AppMentions{Users: []snowflake.ID{}, Roles: []snowflake.ID{}}
	if a.channels[channelID] == nil {
		return out, fmt.Errorf("channel %d: %w", channelID, ErrUnknownChannel)
	}
	var p permissions.Bits
	if _, ok := a.members[botUserID]; ok {
		p = a.decide(permissions.DecisionRead, botUserID, channelID)
	}
	privileged := permissions.AccessOf(p).CanView() && p.Has(permissions.MentionEveryone)
	out.Everyone = everyone && privileged
	for _, u := range users {
		if _, ok := a.members[u]; ok && a.canView(u, channelID) && !slices.Contains(out.Users, u) {
			out.Users = append(out.Users, u)
		}
	}
	for _, id := range roles {
		r, ok := a.roles[id]
		if !ok || id == a.id || slices.Contains(out.Roles, id) {
			continue
		}
		if r.Mentionable || privileged {
			out.Roles = append(out.Roles, id)
		}
	}
	return out, nil
}
