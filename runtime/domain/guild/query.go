package guild

import (
	"context"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// member returns the caller's membership or ErrMissingAccess.
func (a *Actor) member(userID snowflake.ID) (*store.Member, error) {
	m := a.members[userID]
	if m == nil {
		return nil, fmt.Errorf("user %d in guild %d: %w", userID, a.id, ErrMissingAccess)
	}
	return m, nil
}

// channelFor checks that userID sees channelID and has perms in it.
func (a *Actor) channelFor(userID, channelID snowflake.ID, perms permissions.Bits) (ChannelView, error) {
	if _, err := a.member(userID); err != nil {
		return ChannelView{}, err
	}
	c := a.channels[channelID]
	if c == nil {
		return ChannelView{}, fmt.Errorf("channel %d: %w", channelID, ErrUnknownChannel)
	}
	p := a.decide(permissions.DecisionRead, userID, channelID)
	if !permissions.AccessOf(p).CanView() {
		return ChannelView{}, fmt.Errorf("channel %d: %w", channelID, ErrMissingAccess)
	}
	if !p.Has(perms) {
		return ChannelView{}, fmt.Errorf("channel %d needs %d: %w", channelID, perms&^p, ErrMissingPermissions)
	}
	return ChannelView{Channel: cloneChannel(*c), Permissions: p}, nil
}

// guildPerms checks the caller's guild-level permissions.
func (a *Actor) guildPerms(userID snowflake.ID, perms permissions.Bits) error {
	if _, err := a.member(userID); err != nil {
		return err
	}
	p := a.engine.Base(userID, a.svc.cfg.Now())
	if !p.Has(perms) {
		return fmt.Errorf("guild %d needs %d: %w", a.id, perms&^p, ErrMissingPermissions)
	}
	return nil
}

func cloneChannel(c store.Channel) store.Channel {
	c.Overwrites = slices.Clone(c.Overwrites)
	c.Recipients = slices.Clone(c.Recipients)
	c.AvailableTags = slices.Clone(c.AvailableTags)
	return c
}

// GuildInfo returns a guild as userID, a member, sees it.
func (s *Service) GuildInfo(ctx context.Context, userID, guildID snowflake.ID) (GuildInfo, error) {
	var out GuildInfo
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		out = a.info(userID)
		return nil
	})
	return out, err
}

// List lists the guild channels userID sees, by position then id.
func (cs *Channels) List(ctx context.Context, userID, guildID snowflake.ID) ([]store.Channel, error) {
	s := cs.s
	var out []store.Channel
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		out = a.sortedChannels(userID)
		return nil
	})
	return out, err
}

// Authorize checks that userID sees the guild channel channelID and holds
// perms in it (0 checks VIEW_CHANNEL only). A channel the user cannot see
// fails with ErrMissingAccess, a missing permission with
// ErrMissingPermissions.
func (s *Service) Authorize(ctx context.Context, userID, channelID snowflake.ID, perms permissions.Bits) (ChannelView, error) {
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return ChannelView{}, err
	}
	if guildID == 0 {
		c, err := s.private.authorize(ctx, userID, channelID)
		if err != nil {
			return ChannelView{}, err
		}
		if !privatePermissions.Has(perms) {
			return ChannelView{}, fmt.Errorf("private channel %d: %w", channelID, ErrMissingPermissions)
		}
		return ChannelView{Channel: c, Permissions: privatePermissions}, nil
	}
	var out ChannelView
	err = s.do(ctx, guildID, func(a *Actor) error {
		var err error
		out, err = a.channelFor(userID, channelID, perms)
		return err
	})
	return out, err
}

// AuthorizeGuild checks userID's guild-level permissions (owner and
// ADMINISTRATOR hold all).
func (s *Service) AuthorizeGuild(ctx context.Context, userID, guildID snowflake.ID, perms permissions.Bits) error {
	return s.do(ctx, guildID, func(a *Actor) error { return a.guildPerms(userID, perms) })
}

// ReadGrant is the answer to AuthorizeRead.
type ReadGrant struct {
	Channel store.Channel
	// History is false when the user sees the channel but lacks
	// READ_MESSAGE_HISTORY: Discord then returns no messages.
	History bool
}

// AuthorizeRead checks VIEW_CHANNEL and READ_MESSAGE_HISTORY for a
// history read, through Visibility.
func (s *Service) AuthorizeRead(ctx context.Context, userID, channelID snowflake.ID) (ReadGrant, error) {
	v, err := s.Visibility(ctx, userID, channelID)
	if err != nil {
		return ReadGrant{}, err
	}
	return ReadGrant{Channel: v.Channel, History: v.Access.CanReadHistory()}, nil
}

// List lists a guild's roles by position for a member.
func (rl *Roles) List(ctx context.Context, userID, guildID snowflake.ID) ([]store.Role, error) {
	s := rl.s
	var out []store.Role
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		out = a.sortedRoles()
		return nil
	})
	return out, err
}

// Get returns one member of a guild, for a member of it.
func (mb *Members) Get(ctx context.Context, userID, guildID, memberID snowflake.ID) (store.Member, error) {
	s := mb.s
	var out store.Member
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		m := a.members[memberID]
		if m == nil {
			return fmt.Errorf("member %d of guild %d: %w", memberID, guildID, ErrUnknownMember)
		}
		out = *m
		out.Roles = slices.Clone(m.Roles)
		return nil
	})
	return out, err
}

// List lists up to limit members with user id above after, by user id.
func (mb *Members) List(ctx context.Context, userID, guildID snowflake.ID, limit int, after snowflake.ID) ([]store.Member, error) {
	s := mb.s
	var out []store.Member
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		ids := make([]snowflake.ID, 0, len(a.members))
		for id := range a.members {
			if id > after {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, cmpID)
		if len(ids) > limit {
			ids = ids[:limit]
		}
		out = make([]store.Member, 0, len(ids))
		for _, id := range ids {
			m := *a.members[id]
			m.Roles = slices.Clone(m.Roles)
			out = append(out, m)
		}
		return nil
	})
	return out, err
}
