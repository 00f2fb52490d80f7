package readstaterole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// guildPerms is readstate.Visibility and readstate.Roles for a read-state
// node, which holds no guild actor: it asks the guild node owning the
// channel's guild (GuildNode.CanView and GuildNode.RoleMembers, answered
// by guildBackend). The channel → guild
// lookup and private channels (no guild) are answered from the store by
// the process's guild.Reader.
//
// A guild owner that cannot be reached is asked again until it answers
// (the ring names a live owner within a lease TTL), at most ownerWait:
// answering "cannot see" at once would drop a mention whose event is
// consumed while the owner is down, and the store's outbox relays a dead
// guild node's events from the survivors, often before the ring moved.
type guildPerms struct {
	local  *guild.Reader
	guilds transport.GuildClient
	log    *slog.Logger
	// ownerWait bounds the retries of one check (0: defaultOwnerWait).
	ownerWait time.Duration
}

// defaultOwnerWait is guildPerms.ownerWait's default: far longer than a
// ring change after a guild node's death takes.
const defaultOwnerWait = 20 * time.Second

// CanView implements readstate.Visibility.
func (p guildPerms) CanView(ctx context.Context, user, channel snowflake.ID) bool {
	gid, err := p.local.ChannelGuild(ctx, channel)
	if err != nil {
		return false
	}
	if gid == 0 {
		return p.local.CanViewPrivate(ctx, user, channel)
	}
	wait := p.ownerWait
	if wait <= 0 {
		wait = defaultOwnerWait
	}
	deadline := time.Now().Add(wait)
	backoff := 50 * time.Millisecond
	for {
		ok, err := p.guilds.CanView(ctx, gid, user, channel)
		if err == nil {
			return ok
		}
		if errors.Is(err, transport.ErrInvalid) || ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			p.log.Warn("visibility check on the guild owner failed", "guild_id", gid, "channel_id", channel, "err", err)
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// RoleMembers implements readstate.Roles.
func (p guildPerms) RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error) {
	ids, err := p.guilds.RoleMembers(ctx, guildID, role)
	if err != nil {
		return nil, fmt.Errorf("readstate: role members of %d in guild %d: %w", role, guildID, err)
	}
	return ids, nil
}
