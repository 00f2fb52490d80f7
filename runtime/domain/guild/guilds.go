package guild

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// CreateGuild creates a guild owned by ownerID with its @everyone role
// (id = guild id, DefaultEveryone bits), a text channel "general" and the
// owner as its first member, all written to the store before it returns.
func (s *Service) CreateGuild(ctx context.Context, ownerID snowflake.ID, name string) (GuildInfo, error) {
	if n := utf8.RuneCountInString(name); n < 2 || n > 100 {
		return GuildInfo{}, fmt.Errorf("guild name length %d: %w", n, ErrInvalid)
	}
	id, err := s.deps.IDs.Next()
	if err != nil {
		return GuildInfo{}, fmt.Errorf("create guild: %w: %w", ErrUnavailable, err)
	}
	chID, err := s.deps.IDs.Next()
	if err != nil {
		return GuildInfo{}, fmt.Errorf("create guild: %w: %w", ErrUnavailable, err)
	}
	now := s.cfg.Now()
	g := store.Guild{ID: id, Name: name, OwnerID: ownerID, CreatedAt: now}
	if err := s.deps.Store.PutGuild(ctx, g); err != nil {
		return GuildInfo{}, storeErr("create guild", err)
	}
	everyone := store.Role{ID: id, GuildID: id, Name: "@everyone", Permissions: uint64(permissions.DefaultEveryone)}
	if err := s.deps.Store.PutRole(ctx, everyone); err != nil {
		return GuildInfo{}, storeErr("create guild", err)
	}
	general := store.Channel{ID: chID, GuildID: id, Type: store.ChannelText, Name: "general"}
	if err := s.deps.Store.PutChannel(ctx, general); err != nil {
		return GuildInfo{}, storeErr("create guild", err)
	}
	owner := store.Member{GuildID: id, UserID: ownerID, Roles: []snowflake.ID{}, JoinedAt: now}
	if err := s.deps.Store.PutMember(ctx, owner); err != nil {
		return GuildInfo{}, storeErr("create guild", err)
	}
	info, err := s.GuildInfo(ctx, ownerID, id)
	if err != nil {
		return GuildInfo{}, err
	}
	s.subscribeUser(ctx, ownerID, id)
	return info, nil
}

// GuildPatch changes a guild; nil fields stay.
type GuildPatch struct {
	Name        *string
	Description *string
	Icon        *string
	OwnerID     *snowflake.ID
}

// ModifyGuild applies a patch (MANAGE_GUILD; ownership transfer by the
// owner only, to a member) and fans out GUILD_UPDATE.
func (s *Service) ModifyGuild(ctx context.Context, userID, guildID snowflake.ID, p GuildPatch) (GuildInfo, error) {
	var out GuildInfo
	err := s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.ManageGuild); err != nil {
			return err
		}
		g := a.guild
		if p.Name != nil {
			if n := utf8.RuneCountInString(*p.Name); n < 2 || n > 100 {
				return fmt.Errorf("guild name length %d: %w", n, ErrInvalid)
			}
			g.Name = *p.Name
		}
		if p.Description != nil {
			g.Description = *p.Description
		}
		if p.Icon != nil {
			g.Icon = *p.Icon
		}
		if p.OwnerID != nil && *p.OwnerID != g.OwnerID {
			if userID != g.OwnerID {
				return fmt.Errorf("transfer guild %d: %w", a.id, ErrMissingPermissions)
			}
			if _, ok := a.members[*p.OwnerID]; !ok {
				return fmt.Errorf("transfer guild %d: %w", a.id, ErrUnknownMember)
			}
			g.OwnerID = *p.OwnerID
		}
		if err := a.svc.deps.Store.PutGuild(ctx, g); err != nil {
			return storeErr("modify guild", err)
		}
		ownerChanged := g.OwnerID != a.guild.OwnerID
		a.guild = g
		if ownerChanged {
			a.engine.SetOwner(g.OwnerID)
		}
		out = a.info(userID)
		a.broadcast(ctx, "GUILD_UPDATE", wire.GuildFrom(a.guild, out.Roles), IntentGuilds)
		if ownerChanged {
			a.syncVisibility(ctx, nil, nil, 0)
		}
		return nil
	})
	return out, err
}

// DeleteGuild deletes a guild (owner only): every subscriber gets
// GUILD_DELETE and is detached, and the actor stops.
func (s *Service) DeleteGuild(ctx context.Context, userID, guildID snowflake.ID) error {
	return s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		if userID != a.guild.OwnerID {
			return fmt.Errorf("delete guild %d: %w", a.id, ErrMissingPermissions)
		}
		if err := a.svc.deps.Store.DeleteGuild(ctx, a.id); err != nil {
			return storeErr("delete guild", err)
		}
		gone := wire.UnavailableGuild{ID: a.id}
		for _, sub := range a.sortedSubs() {
			a.sendTo(ctx, sub.s, "GUILD_DELETE", gone)
			a.svc.detach(sub.s.ID, a.id)
		}
		a.subs = make(map[event.SessionID]*subscriber)
		a.subsSorted = nil
		for id := range a.channels {
			a.svc.channelGuild.Delete(id)
		}
		a.failed = fmt.Errorf("guild %d: %w", a.id, ErrUnknownGuild)
		return nil
	})
}
