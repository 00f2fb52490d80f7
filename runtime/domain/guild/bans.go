package guild

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Ban errors.
var (
	// ErrBanned means the user is banned from the guild (Discord 40007).
	ErrBanned = errors.New("guild: user is banned")
	// ErrUnknownBan means there is no such ban (Discord 10026).
	ErrUnknownBan = errors.New("guild: unknown ban")
)

// BanEvent is GUILD_BAN_ADD and GUILD_BAN_REMOVE.
type BanEvent struct {
	GuildID snowflake.ID `json:"guild_id"`
	User    wire.User    `json:"user"`
}

// refuseBanned fails with ErrBanned when userID is banned (actor only):
// a banned user cannot rejoin through an invite.
func (a *Actor) refuseBanned(ctx context.Context, userID snowflake.ID) error {
	_, err := a.svc.deps.Store.GetBan(ctx, a.id, userID)
	switch {
	case err == nil:
		return fmt.Errorf("join guild %d: %w", a.id, ErrBanned)
	case errors.Is(err, store.ErrNotFound):
		return nil
	}
	return storeErr("check ban", err)
}

// Ban bans targetID (a member or any user) from the guild, in one actor
// step: the caller needs BAN_MEMBERS, the owner is never banned, and a
// member target must rank below the caller's highest role (the owner
// outranks everyone). The ban is stored first; a member is then removed
// (their sessions get GUILD_DELETE, the others GUILD_MEMBER_REMOVE) and
// moderators' sessions get GUILD_BAN_ADD. It reports whether the target
// was a member.
func (mb *Members) Ban(ctx context.Context, userID, guildID, targetID snowflake.ID, reason string) (bool, error) {
	s := mb.s
	u, err := s.User(ctx, targetID)
	if err != nil {
		return false, err
	}
	wasMember := false
	err = s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.BanMembers); err != nil {
			return err
		}
		if targetID == a.guild.OwnerID {
			return fmt.Errorf("ban owner of %d: %w", a.id, ErrMissingPermissions)
		}
		m, isMember := a.members[targetID]
		if isMember && !a.outranks(userID, a.highest(targetID)) {
			return fmt.Errorf("ban %d above caller: %w", targetID, ErrMissingPermissions)
		}
		b := store.Ban{GuildID: a.id, UserID: targetID, Reason: reason, CreatedAt: a.svc.cfg.Now()}
		if err := a.svc.deps.Store.PutBan(ctx, b); err != nil {
			return storeErr("put ban", err)
		}
		if isMember {
			if err := a.dropMember(ctx, m, "ban member"); err != nil {
				return err
			}
			a.memberLeft(ctx, targetID)
			wasMember = true
		}
		a.moderators(ctx, "GUILD_BAN_ADD", BanEvent{GuildID: a.id, User: u})
		return nil
	})
	return wasMember, err
}

// Unban lifts a ban (BAN_MEMBERS) and sends GUILD_BAN_REMOVE.
func (mb *Members) Unban(ctx context.Context, userID, guildID, targetID snowflake.ID) error {
	s := mb.s
	u, err := s.User(ctx, targetID)
	if err != nil {
		return err
	}
	return s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.BanMembers); err != nil {
			return err
		}
		err := a.svc.deps.Store.DeleteBan(ctx, a.id, targetID)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("ban of %d: %w", targetID, ErrUnknownBan)
		}
		if err != nil {
			return storeErr("delete ban", err)
		}
		a.moderators(ctx, "GUILD_BAN_REMOVE", BanEvent{GuildID: a.id, User: u})
		return nil
	})
}

// moderators sends a ban event to GUILD_MODERATION sessions of users
// holding BAN_MEMBERS.
func (a *Actor) moderators(ctx context.Context, typ string, payload any) {
	a.toHolders(ctx, typ, payload, permissions.BanMembers, false)
}

// MessageChannels lists every channel of the guild that holds messages,
// for userID holding perms at the guild level (a ban's message purge runs
// over channels the moderator may not see: Discord purges them all).
func (mb *Members) MessageChannels(ctx context.Context, userID, guildID snowflake.ID, perms permissions.Bits) ([]snowflake.ID, error) {
	s := mb.s
	var out []snowflake.ID
	err := s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, perms); err != nil {
			return err
		}
		for id, c := range a.channels {
			if c.Type == store.ChannelText || c.Type == store.ChannelVoice {
				out = append(out, id)
			}
		}
		return nil
	})
	return out, err
}
