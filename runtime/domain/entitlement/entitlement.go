package entitlement

import (
	"context"
	"errors"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Errors of the package, wrapped with context.
var (
	// ErrUnavailable means entitlements cannot be established now: the
	// Source or the push channel is unreachable. A new bot IDENTIFY is
	// refused with it.
	ErrUnavailable = errors.New("entitlement: unavailable")
	// ErrNotGoverned means the user is no application's bot: it holds no
	// lease (Source.Grant returns it).
	ErrNotGoverned = errors.New("entitlement: not an application bot")
	// ErrConfig means a Config or a dependency is invalid.
	ErrConfig = errors.New("entitlement: invalid configuration")
)

// Grant is what a bot is entitled to now, as the Source reads it.
type Grant struct {
	// ApplicationID is the bot's application.
	ApplicationID snowflake.ID
	// TokenGeneration is the bot user's token generation; a change means
	// the token was reset and every session must close.
	TokenGeneration uint32
	// Guilds are the guilds whose installation of the application exists.
	Guilds []snowflake.ID
	// Unentitled are guilds the bot is a member of without an
	// installation: the guild tier has not (yet) applied an uninstall, or
	// an install is between adding the member and writing its record. A
	// guild unentitled at two reads in a row is revoked, so one renewal
	// period covers an install in progress.
	Unentitled []snowflake.ID
}

// Source reads grants from the record of truth (the installation records
// and the user's token generation). It is called once per lease renewal
// and once per bot IDENTIFY; implementations should answer in a few
// reads. A user that is no application's bot gives ErrNotGoverned; any
// other error is an outage.
type Source interface {
	Grant(ctx context.Context, botUserID snowflake.ID) (Grant, error)
}

// Reason says why the Manager closes a bot's sessions.
type Reason int

const (
	// ReasonTokenReset: the token no longer verifies (close 4004, not
	// resumable).
	ReasonTokenReset Reason = iota + 1
	// ReasonApplicationGone: the bot's application no longer exists
	// (close 4004).
	ReasonApplicationGone
	// ReasonUnavailable: the lease could not be renewed for longer than
	// the grace period (close 4000; the client reconnects and identifies
	// again once entitlements can be read).
	ReasonUnavailable
)

// String names the reason for logs and metrics.
func (r Reason) String() string {
	switch r {
	case ReasonTokenReset:
		return "token_reset"
	case ReasonApplicationGone:
		return "application_gone"
	case ReasonUnavailable:
		return "unavailable"
	default:
		return "unknown"
	}
}

// Enforcer acts on this gateway node's sessions. Both calls must be safe
// to repeat: a revocation can arrive by push and again by renewal.
type Enforcer interface {
	// RevokeGuild stops guildID's events to session s: it detaches the
	// session from the guild, then sends GUILD_DELETE (as Discord does
	// when a bot is removed) unless the guild tier already did, so that
	// no event of the guild follows it.
	RevokeGuild(ctx context.Context, s event.Session, guildID snowflake.ID)
	// CloseBot ends every session of botUserID on this node for good,
	// with the close code of reason. It returns how many it ended.
	CloseBot(ctx context.Context, botUserID snowflake.ID, reason Reason) int
}

// Kind is what a revocation took away.
type Kind string

// Revocation kinds.
const (
	// KindUninstall: the application was removed from GuildID.
	KindUninstall Kind = "uninstall"
	// KindTokenReset: the bot's token was reset.
	KindTokenReset Kind = "token_reset"
	// KindPermissions: the managed role in GuildID was narrowed.
	KindPermissions Kind = "permissions"
)

// Revocation is one push: published after the record of truth changed.
type Revocation struct {
	// ID is unique per publication; readers use it to tell a revocation
	// they applied from one they missed.
	ID            string       `json:"id"`
	Kind          Kind         `json:"kind"`
	ApplicationID snowflake.ID `json:"application_id,string"`
	BotUserID     snowflake.ID `json:"bot_user_id,string"`
	// GuildID is set for KindUninstall and KindPermissions.
	GuildID snowflake.ID `json:"guild_id,string,omitempty"`
	// TokenGeneration is the bot's generation after a KindTokenReset:
	// only sessions identified with an older one close.
	TokenGeneration uint32 `json:"token_generation,omitempty"`
	// At is the publisher's clock in Unix nanoseconds (for measuring
	// propagation).
	At int64 `json:"at"`
}

// onShard reports whether session s carries guildID: shard_id =
// (guild_id >> 22) % num_shards.
func onShard(s event.Session, guildID snowflake.ID) bool {
	if s.ShardCount <= 1 {
		return true
	}
	return int((uint64(guildID)>>22)%uint64(s.ShardCount)) == s.ShardID
}

// guildSet builds a set from a list.
func guildSet(ids []snowflake.ID) map[snowflake.ID]bool {
	out := make(map[snowflake.ID]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// revocable lists the guilds a new read takes away, sorted: those of the
// last grant (old) missing from the new one (now), and those unentitled
// at this read and the previous one (suspect); guilds already revoked
// are left out.
func revocable(old, now, suspect, revoked map[snowflake.ID]bool, unentitled []snowflake.ID) []snowflake.ID {
	var out []snowflake.ID
	for g := range old {
		if !now[g] && !revoked[g] {
			out = append(out, g)
		}
	}
	for _, g := range unentitled {
		if suspect[g] && !old[g] && !revoked[g] && !now[g] {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
