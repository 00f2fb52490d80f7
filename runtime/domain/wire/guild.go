package wire

import (
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Guild is Discord's guild object as GET /guilds/{id} and GUILD_UPDATE
// return it.
type Guild struct {
	ID                          snowflake.ID  `json:"id"`
	Name                        string        `json:"name"`
	Icon                        *string       `json:"icon"`
	Splash                      *string       `json:"splash"`
	DiscoverySplash             *string       `json:"discovery_splash"`
	Banner                      *string       `json:"banner"`
	Description                 *string       `json:"description"`
	OwnerID                     snowflake.ID  `json:"owner_id"`
	Region                      string        `json:"region"`
	AFKChannelID                *snowflake.ID `json:"afk_channel_id"`
	AFKTimeout                  int           `json:"afk_timeout"`
	WidgetEnabled               bool          `json:"widget_enabled"`
	VerificationLevel           int           `json:"verification_level"`
	DefaultMessageNotifications int           `json:"default_message_notifications"`
	ExplicitContentFilter       int           `json:"explicit_content_filter"`
	Roles                       []Role        `json:"roles"`
	Emojis                      []any         `json:"emojis"`
	Stickers                    []any         `json:"stickers"`
	Features                    []string      `json:"features"`
	MFALevel                    int           `json:"mfa_level"`
	ApplicationID               *snowflake.ID `json:"application_id"`
	SystemChannelID             *snowflake.ID `json:"system_channel_id"`
	SystemChannelFlags          int           `json:"system_channel_flags"`
	RulesChannelID              *snowflake.ID `json:"rules_channel_id"`
	VanityURLCode               *string       `json:"vanity_url_code"`
	PremiumTier                 int           `json:"premium_tier"`
	PremiumSubscriptionCount    int           `json:"premium_subscription_count"`
	PreferredLocale             string        `json:"preferred_locale"`
	PublicUpdatesChannelID      *snowflake.ID `json:"public_updates_channel_id"`
	NSFWLevel                   int           `json:"nsfw_level"`
	PremiumProgressBarEnabled   bool          `json:"premium_progress_bar_enabled"`
	MaxMembers                  int           `json:"max_members"`
}

// GuildFrom converts a stored guild with its roles.
func GuildFrom(g store.Guild, roles []store.Role) Guild {
	rs := make([]Role, 0, len(roles))
	for _, r := range roles {
		rs = append(rs, RoleFrom(r))
	}
	var icon, desc *string
	if g.Icon != "" {
		s := g.Icon
		icon = &s
	}
	if g.Description != "" {
		s := g.Description
		desc = &s
	}
	return Guild{
		ID:              g.ID,
		Name:            g.Name,
		Icon:            icon,
		Description:     desc,
		OwnerID:         g.OwnerID,
		Region:          "deprecated",
		AFKTimeout:      300,
		Roles:           rs,
		Emojis:          []any{},
		Stickers:        []any{},
		Features:        []string{},
		PreferredLocale: "en-US",
		MaxMembers:      500000,
	}
}

// GuildCreate is the full GUILD_CREATE dispatch.
type GuildCreate struct {
	Guild
	JoinedAt             Timestamp `json:"joined_at"`
	Large                bool      `json:"large"`
	Unavailable          bool      `json:"unavailable"`
	MemberCount          int       `json:"member_count"`
	VoiceStates          []any     `json:"voice_states"`
	Members              []Member  `json:"members"`
	Channels             []Channel `json:"channels"`
	Threads              []any     `json:"threads"`
	Presences            []any     `json:"presences"`
	StageInstances       []any     `json:"stage_instances"`
	GuildScheduledEvents []any     `json:"guild_scheduled_events"`
	SoundboardSounds     []any     `json:"soundboard_sounds"`
}

// UnavailableGuild is a guild in READY or GUILD_DELETE.
type UnavailableGuild struct {
	ID          snowflake.ID `json:"id"`
	Unavailable bool         `json:"unavailable"`
}

// PartialGuild is an entry of GET /users/@me/guilds.
type PartialGuild struct {
	ID          snowflake.ID `json:"id"`
	Name        string       `json:"name"`
	Icon        *string      `json:"icon"`
	Banner      *string      `json:"banner"`
	Owner       bool         `json:"owner"`
	Permissions Bits         `json:"permissions"`
	Features    []string     `json:"features"`
}
