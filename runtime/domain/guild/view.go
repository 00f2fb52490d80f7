package guild

import (
	"context"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// GuildInfo is a guild as one of its members sees it.
type GuildInfo struct {
	Guild       store.Guild
	Roles       []store.Role // by position, then id
	MemberCount int
	// Permissions are the caller's guild-level permissions.
	Permissions permissions.Bits
}

// ChannelView is a channel with the caller's permissions in it.
type ChannelView struct {
	Channel     store.Channel
	Permissions permissions.Bits
}

// sortedRoles returns the roles by position, then id.
func (a *Actor) sortedRoles() []store.Role {
	out := make([]store.Role, 0, len(a.roles))
	for _, r := range a.roles {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(x, y store.Role) int {
		if x.Position != y.Position {
			return x.Position - y.Position
		}
		return cmpID(x.ID, y.ID)
	})
	return out
}

func cmpID(x, y snowflake.ID) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// sortedChannels returns the channels userID sees, by position then id.
func (a *Actor) sortedChannels(userID snowflake.ID) []store.Channel {
	out := make([]store.Channel, 0, len(a.channels))
	for id, c := range a.channels {
		if c.Thread == nil && a.canView(userID, id) {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, compareChannels)
	return out
}

func (a *Actor) info(userID snowflake.ID) GuildInfo {
	return GuildInfo{
		Guild:       a.guild,
		Roles:       a.sortedRoles(),
		MemberCount: len(a.members),
		Permissions: a.engine.Base(userID, a.svc.cfg.Now()),
	}
}

// wireMember converts a member with its user object.
func (a *Actor) wireMember(ctx context.Context, m store.Member) wire.Member {
	var user *wire.User
	if u, err := a.svc.User(ctx, m.UserID); err == nil {
		user = &u
	} else {
		user = &wire.User{ID: m.UserID, Username: "unknown", Discriminator: "0"}
	}
	return wire.MemberFrom(m, user, a.svc.cfg.Now())
}

// guildCreate builds the GUILD_CREATE a subscriber gets: only the channels
// its user sees, every member in small guilds, only its own in large ones.
func (a *Actor) guildCreate(ctx context.Context, userID snowflake.ID) wire.GuildCreate {
	roles := a.sortedRoles()
	gc := wire.GuildCreate{
		Guild:                wire.GuildFrom(a.guild, roles),
		MemberCount:          len(a.members),
		Large:                len(a.members) > a.svc.cfg.LargeThreshold,
		VoiceStates:          a.voiceStatesFor(ctx, userID),
		Threads:              []any{},
		Presences:            []any{},
		StageInstances:       []any{},
		GuildScheduledEvents: []any{},
		SoundboardSounds:     []any{},
	}
	if m, ok := a.members[userID]; ok {
		gc.JoinedAt = wire.Timestamp(m.JoinedAt)
	}
	// Each thread the user joined carries its thread member, as in the
	// active-threads list, so a client learns its joined threads from
	// GUILD_CREATE alone.
	for _, t := range a.activeThreads(userID) {
		c := wire.ChannelFrom(t, nil)
		if m, ok := a.threadMembers[t.ID][userID]; ok {
			tm := wire.ThreadMemberFrom(m)
			c.Member = &tm
		}
		gc.Threads = append(gc.Threads, c)
	}
	chans := a.sortedChannels(userID)
	gc.Channels = make([]wire.Channel, 0, len(chans))
	for _, c := range chans {
		gc.Channels = append(gc.Channels, wire.ChannelFrom(c, nil))
	}
	if gc.Large {
		gc.Members = []wire.Member{}
		if m, ok := a.members[userID]; ok {
			gc.Members = append(gc.Members, a.wireMember(ctx, *m))
		}
	} else {
		ids := make([]snowflake.ID, 0, len(a.members))
		for id := range a.members {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, cmpID)
		gc.Members = make([]wire.Member, 0, len(ids))
		for _, id := range ids {
			gc.Members = append(gc.Members, a.wireMember(ctx, *a.members[id]))
		}
	}
	return gc
}

// highest returns the position of the member's highest role (0 for
// @everyone only, -1 for a non-member), as the engine's hierarchy sees it.
func (a *Actor) highest(userID snowflake.ID) int { return a.engine.Highest(userID) }

// outranks reports whether actor may manage something at position pos:
// the owner always, others only strictly below their highest role.
func (a *Actor) outranks(actorID snowflake.ID, pos int) bool {
	return a.engine.Outranks(actorID, pos)
}
