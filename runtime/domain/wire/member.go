package wire

import (
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Member is Discord's guild member object. User is omitted in the partial
// member attached to messages.
type Member struct {
	User                       *User          `json:"user,omitempty"`
	Nick                       *string        `json:"nick"`
	Avatar                     *string        `json:"avatar"`
	Roles                      []snowflake.ID `json:"roles"`
	JoinedAt                   Timestamp      `json:"joined_at"`
	PremiumSince               *Timestamp     `json:"premium_since"`
	Deaf                       bool           `json:"deaf"`
	Mute                       bool           `json:"mute"`
	Flags                      int            `json:"flags"`
	Pending                    bool           `json:"pending"`
	CommunicationDisabledUntil *Timestamp     `json:"communication_disabled_until"`
	Permissions                *Bits          `json:"permissions,omitempty"`
}

// MemberFrom converts a stored member. user may be nil for the partial
// member of a message. Roles never include @everyone, as in Discord.
func MemberFrom(m store.Member, user *User, now time.Time) Member {
	var nick *string
	if m.Nick != "" {
		s := m.Nick
		nick = &s
	}
	roles := make([]snowflake.ID, 0, len(m.Roles))
	for _, r := range m.Roles {
		if r != m.GuildID {
			roles = append(roles, r)
		}
	}
	var until *Timestamp
	if m.CommunicationDisabledUntil.After(now) {
		until = OptionalTimestamp(m.CommunicationDisabledUntil)
	}
	return Member{
		User:                       user,
		Nick:                       nick,
		Roles:                      roles,
		JoinedAt:                   Timestamp(m.JoinedAt),
		CommunicationDisabledUntil: until,
	}
}

// MemberEvent is GUILD_MEMBER_ADD and GUILD_MEMBER_UPDATE: a member with
// its guild id.
type MemberEvent struct {
	Member
	GuildID snowflake.ID `json:"guild_id"`
}

// MemberRemove is GUILD_MEMBER_REMOVE.
type MemberRemove struct {
	GuildID snowflake.ID `json:"guild_id"`
	User    User         `json:"user"`
}
