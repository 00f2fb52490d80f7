package readstaterole

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
)

// guildPerms is readstate.Visibility and readstate.Roles for a read-state
// node, which holds no guild actor: it asks the guild node owning the
// channel's guild (GuildNode.CanView and GuildNode.RoleMembers, answered
// by guildBackend). The channel → guild
// lookup and private channels (no guild) are answered from the store by a
// guild.Service that loads no actor. A guild owner that cannot be reached
// counts as "cannot see": a mention consumed meanwhile is not counted.
type guildPerms struct {
	local  *guild.Service
	guilds transport.GuildClient
	log    *slog.Logger
}

// CanView implements readstate.Visibility.
func (p guildPerms) CanView(ctx context.Context, user, channel snowflake.ID) bool {
	gid, err := p.local.ChannelGuild(ctx, channel)
	if err != nil {
		return false
	}
	if gid == 0 {
		return p.local.CanView(ctx, user, channel)
	}
	ok, err := p.guilds.CanView(ctx, gid, user, channel)
	if err != nil {
		p.log.Warn("visibility check on the guild owner failed", "guild_id", gid, "channel_id", channel, "err", err)
		return false
	}
	return ok
}

// RoleMembers implements readstate.Roles.
func (p guildPerms) RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error) {
	ids, err := p.guilds.RoleMembers(ctx, guildID, role)
	if err != nil {
		return nil, fmt.Errorf("readstate: role members of %d in guild %d: %w", role, guildID, err)
	}
	return ids, nil
}
