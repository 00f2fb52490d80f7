package guildrole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// guildBackend serves GuildNode with the local guild service.
type guildBackend struct {
	svc *guild.Service
	// presences is the guild node's presence cache with --presence, nil
	// without.
	presences *presenceCache
}

var _ transport.GuildBackend = guildBackend{}

// Subscribe implements transport.GuildBackend.
func (b guildBackend) Subscribe(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	return notOwner(b.svc.AttachSession(ctx, guildID, s))
}

// SubscribeMoved implements transport.GuildBackend.
func (b guildBackend) SubscribeMoved(ctx context.Context, guildID snowflake.ID, s event.Session, refresh bool) error {
	return notOwner(b.svc.AttachMovedSession(ctx, guildID, s, refresh))
}

// Disconnect implements transport.GuildBackend. Gateways detach only
// sessions that ended for good; once no guild of this node holds the
// session, its typing focus here ends too (guild.Service.SessionEnded).
func (b guildBackend) Disconnect(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	err := b.svc.DetachSession(ctx, guildID, s)
	if err == nil && b.presences != nil && !b.svc.HasSession(s.ID) {
		b.svc.SessionEnded(s.ID)
	}
	return notOwner(err)
}

// MoveSession implements transport.GuildBackend: a session the guild
// does not deliver to is guild.ErrNotSubscribed (NotFound on the wire).
func (b guildBackend) MoveSession(ctx context.Context, guildID snowflake.ID, mv guild.Move) (int, error) {
	n, err := b.svc.MoveSession(ctx, guildID, mv)
	if err != nil && !errors.Is(err, guild.ErrNotSubscribed) {
		return 0, notOwner(err)
	}
	return n, err
}

// CanView implements transport.GuildBackend for the read-state role's
// mention counting.
func (b guildBackend) CanView(ctx context.Context, _, user, channel snowflake.ID) (bool, error) {
	return b.svc.CanView(ctx, user, channel), nil
}

// RoleMembers implements transport.GuildBackend: an unknown guild is
// guild.ErrUnknownGuild (NotFound on the wire).
func (b guildBackend) RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error) {
	ids, err := b.svc.RoleMembers(ctx, guildID, role)
	if err != nil && !errors.Is(err, guild.ErrUnknownGuild) {
		return nil, notOwner(err)
	}
	return ids, err
}

// PresenceChanged implements transport.GuildBackend: the presence node's
// broadcast is cached for the guilds loaded later and applied to every
// guild of the user loaded here. A node without --presence does not
// serve it.
func (b guildBackend) PresenceChanged(ctx context.Context, _, user snowflake.ID, p presence.Presence) error {
	if b.presences == nil {
		return fmt.Errorf("%w: presence is off on this guild node", transport.ErrNotServed)
	}
	b.presences.set(user, p)
	b.svc.PresenceChanged(ctx, user, p, nil)
	return nil
}

// LazyRequest implements transport.GuildBackend: op 14, parsed here by
// the gateway's own parser.
func (b guildBackend) LazyRequest(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	req, err := memberlist.ParseRequest(d)
	if err != nil || req.GuildID != guildID {
		return fmt.Errorf("%w: op 14 for guild %d: %v", transport.ErrInvalid, guildID, err)
	}
	return notOwner(b.svc.LazyRequest(ctx, s, req))
}

// RequestMembers implements transport.GuildBackend: op 8.
func (b guildBackend) RequestMembers(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	req, err := memberlist.ParseMembersRequest(d)
	if err != nil || req.GuildID != guildID {
		return fmt.Errorf("%w: op 8 for guild %d: %v", transport.ErrInvalid, guildID, err)
	}
	return notOwner(b.svc.RequestMembers(ctx, s, req))
}

// UpdateVoiceState implements transport.GuildBackend: op 4. A join the
// guild refuses was answered through the guild's events and is no error
// of the call.
func (b guildBackend) UpdateVoiceState(ctx context.Context, s event.Session, req guild.VoiceStateRequest) error {
	if err := b.svc.UpdateVoiceState(ctx, s, req); err != nil && !isVoiceRefusal(err) {
		return notOwner(err)
	}
	return nil
}

// notOwner turns guild.ErrMoved (the actor was unloaded because the guild
// moved) into the transport's ErrNotOwner, so callers retry on the owner.
func notOwner(err error) error {
	if errors.Is(err, guild.ErrMoved) {
		return fmt.Errorf("%w: %w", transport.ErrNotOwner, err)
	}
	return err
}

// isVoiceRefusal reports a join the guild refused (permissions, a full or
// unknown channel): answered, not a failure of the owner.
func isVoiceRefusal(err error) bool {
	for _, e := range []error{guild.ErrMissingPermissions, guild.ErrMissingAccess, guild.ErrUnknownChannel} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
