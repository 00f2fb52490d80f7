package wire

import (
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// InviteGuild is the partial guild inside an invite.
type InviteGuild struct {
	ID          snowflake.ID `json:"id"`
	Name        string       `json:"name"`
	Icon        *string      `json:"icon"`
	Splash      *string      `json:"splash"`
	Banner      *string      `json:"banner"`
	Description *string      `json:"description"`
	Features    []string     `json:"features"`
}

// InviteChannel is the partial channel inside an invite.
type InviteChannel struct {
	ID   snowflake.ID `json:"id"`
	Name string       `json:"name"`
	Type int          `json:"type"`
}

// Invite is Discord's invite object with its metadata.
type Invite struct {
	Type      int           `json:"type"`
	Code      string        `json:"code"`
	GuildID   snowflake.ID  `json:"guild_id"`
	Guild     InviteGuild   `json:"guild"`
	Channel   InviteChannel `json:"channel"`
	Inviter   *User         `json:"inviter,omitempty"`
	Uses      int           `json:"uses"`
	MaxUses   int           `json:"max_uses"`
	MaxAge    int           `json:"max_age"`
	Temporary bool          `json:"temporary"`
	CreatedAt Timestamp     `json:"created_at"`
	ExpiresAt *Timestamp    `json:"expires_at"`
}

// InviteFrom converts a stored invite with its guild and channel.
func InviteFrom(inv store.Invite, g store.Guild, c store.Channel, inviter *User) Invite {
	var exp *Timestamp
	if inv.MaxAge > 0 {
		exp = OptionalTimestamp(inv.CreatedAt.Add(time.Duration(inv.MaxAge) * time.Second))
	}
	var icon *string
	if g.Icon != "" {
		s := g.Icon
		icon = &s
	}
	return Invite{
		Code:      inv.Code,
		GuildID:   g.ID,
		Guild:     InviteGuild{ID: g.ID, Name: g.Name, Icon: icon, Features: []string{}},
		Channel:   InviteChannel{ID: c.ID, Name: c.Name, Type: c.Type},
		Inviter:   inviter,
		Uses:      inv.Uses,
		MaxUses:   inv.MaxUses,
		MaxAge:    inv.MaxAge,
		CreatedAt: Timestamp(inv.CreatedAt),
		ExpiresAt: exp,
	}
}
