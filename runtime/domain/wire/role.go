package wire

import (
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Role is Discord's role object.
type Role struct {
	ID           snowflake.ID `json:"id"`
	Name         string       `json:"name"`
	Color        int          `json:"color"`
	Colors       RoleColors   `json:"colors"`
	Hoist        bool         `json:"hoist"`
	Icon         *string      `json:"icon"`
	UnicodeEmoji *string      `json:"unicode_emoji"`
	Position     int          `json:"position"`
	Permissions  Bits         `json:"permissions"`
	Managed      bool         `json:"managed"`
	Mentionable  bool         `json:"mentionable"`
	Flags        int          `json:"flags"`
}

// RoleColors is a role's colors object: the primary colour (equal to
// color) and the optional gradient colours. Newer libraries read it on
// every role and refuse a guild whose roles lack it.
type RoleColors struct {
	PrimaryColor   int  `json:"primary_color"`
	SecondaryColor *int `json:"secondary_color"`
	TertiaryColor  *int `json:"tertiary_color"`
}

// RoleFrom converts a stored role.
func RoleFrom(r store.Role) Role {
	return Role{
		ID:          r.ID,
		Name:        r.Name,
		Color:       r.Color,
		Colors:      RoleColors{PrimaryColor: r.Color, SecondaryColor: r.SecondaryColor, TertiaryColor: r.TertiaryColor},
		Hoist:       r.Hoist,
		Position:    r.Position,
		Permissions: Bits(r.Permissions),
		Managed:     r.Managed,
		Mentionable: r.Mentionable,
	}
}

// RoleEvent is GUILD_ROLE_CREATE and GUILD_ROLE_UPDATE.
type RoleEvent struct {
	GuildID snowflake.ID `json:"guild_id"`
	Role    Role         `json:"role"`
}

// RoleDelete is GUILD_ROLE_DELETE.
type RoleDelete struct {
	GuildID snowflake.ID `json:"guild_id"`
	RoleID  snowflake.ID `json:"role_id"`
}
