package bots

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/mention"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Guilds is what the bot platform needs from the guild tier. Errors wrap
// ErrUnknownGuild, ErrUnknownChannel, ErrUnknownMember, ErrMissingAccess,
// ErrMissingPermissions or ErrUnavailable.
type Guilds interface {
	// AuthorizeGuild returns nil when userID is a member of guildID whose
	// guild-level permissions include every bit of need (the owner and
	// administrators have all).
	AuthorizeGuild(ctx context.Context, userID, guildID snowflake.ID, need permissions.Bits) error
	// InstallBot adds botUserID as a member of guildID with a managed role
	// named name carrying perms, or, when it is already installed, sets
	// the managed role's permissions to perms. It returns the role's id.
	// The guild checks, in the same step, that installerID may grant
	// perms there (MANAGE_GUILD and every bit of perms; the owner and
	// administrators hold all), else ErrMissingPermissions.
	InstallBot(ctx context.Context, installerID, guildID, botUserID snowflake.ID, name string, perms permissions.Bits) (managedRoleID snowflake.ID, err error)
	// UninstallBot removes the bot member and its managed role; removing
	// a bot that is not a member is not an error.
	UninstallBot(ctx context.Context, guildID, botUserID snowflake.ID) error
	// Channel returns a guild channel (GuildID set); a DM or group DM
	// fails with ErrUnknownChannel (interactions run in guild channels).
	Channel(ctx context.Context, channelID snowflake.ID) (wire.Channel, error)
	// ChannelPermissions returns userID's effective permissions in
	// channelID, evaluated now by the guild's permission engine. A user
	// who is not a member fails with ErrUnknownMember.
	ChannelPermissions(ctx context.Context, userID, channelID snowflake.ID) (permissions.Bits, error)
	// Member returns the member object (with user) for interaction payloads.
	Member(ctx context.Context, guildID, userID snowflake.ID) (wire.Member, error)
	// User returns a user's object (ErrUnknownMember when there is none).
	User(ctx context.Context, userID snowflake.ID) (wire.User, error)
	// Roles returns the guild's roles as its member userID sees them.
	Roles(ctx context.Context, userID, guildID snowflake.ID) ([]wire.Role, error)
}

// Dispatcher delivers gateway events to one user's sessions.
type Dispatcher interface {
	// DeliverToUser sends a dispatch of eventType to userID's sessions;
	// for a bot, guildID selects the shard, (guildID >> 22) % shard count
	// (0: any session). It returns how many sessions received it.
	DeliverToUser(ctx context.Context, userID, guildID snowflake.ID, eventType string, payload json.RawMessage) (delivered int)
}

// RevocationKind says what a Revocation took away.
type RevocationKind int

// Revocation kinds.
const (
	// RevokedInstall: the application was removed from a guild.
	RevokedInstall RevocationKind = iota + 1
	// RevokedToken: the bot's token was reset.
	RevokedToken
	// RevokedPermissions: the bot's managed role in a guild lost bits.
	RevokedPermissions
)

// Revocation is a change that takes something away from a bot, published
// after the records were written.
type Revocation struct {
	Kind          RevocationKind
	ApplicationID snowflake.ID
	BotUserID     snowflake.ID
	// GuildID is set for RevokedInstall and RevokedPermissions.
	GuildID snowflake.ID
	// TokenGeneration is the bot's generation after RevokedToken.
	TokenGeneration uint32
}

// Revocations pushes revocations to every gateway node so that the bot's
// open sessions feel them at once (runtime/domain/entitlement gives each a deadline). A push
// may be lost: the gateways' entitlement leases re-read the records within
// their TTL, so a failed publish is only logged.
type Revocations interface {
	Revoked(ctx context.Context, r Revocation) error
}

// revoked publishes r when Deps.Revocations is set.
func (h *Handler) revoked(ctx context.Context, r Revocation) {
	if h.deps.Revocations == nil {
		return
	}
	if err := h.deps.Revocations.Revoked(context.WithoutCancel(ctx), r); err != nil {
		h.log.Warn("revocation not pushed; leases will apply it", "kind", int(r.Kind), "bot_user_id", r.BotUserID,
			"guild_id", r.GuildID, "err", err)
	}
}

// MessageFlagEphemeral marks a message only its recipient sees.
const MessageFlagEphemeral = 1 << 6

// MessageFlagLoading marks a deferred interaction response still loading.
const MessageFlagLoading = 1 << 7

// Message types the bot platform creates.
const (
	MessageTypeDefault          = 0
	MessageTypeChatInputCommand = 20
)

// NewMessage is a message the bot platform posts on a bot's behalf.
type NewMessage struct {
	ChannelID  snowflake.ID
	GuildID    snowflake.ID
	AuthorID   snowflake.ID
	Content    string
	Embeds     []json.RawMessage
	Components []json.RawMessage
	Flags      int
	Type       int
	TTS        bool
	// EphemeralTo is set with MessageFlagEphemeral: the message is
	// delivered to this user only and not stored in channel history.
	EphemeralTo snowflake.ID
	// InteractionID is the interaction the message answers, if any.
	InteractionID snowflake.ID
	// Attachments are the message's stored files.
	Attachments []store.Attachment
	// AllowedMentions is the body's allowed_mentions (nil: every mention
	// in Content may ping, as Discord parses them).
	AllowedMentions *mention.Allowed
}

// MessageEdit changes a message; nil fields stay as they are.
type MessageEdit struct {
	ChannelID  snowflake.ID
	MessageID  snowflake.ID
	Content    *string
	Embeds     *[]json.RawMessage
	Components *[]json.RawMessage
	Flags      *int
	// Attachments, when set, replaces the message's files (new uploads
	// appended to the kept ones).
	Attachments *[]store.Attachment
	// EphemeralTo is the recipient of an ephemeral message.
	EphemeralTo snowflake.ID
	// AllowedMentions is the body's allowed_mentions; with Content set
	// the message's mentions are resolved again from the new content.
	AllowedMentions *mention.Allowed
}

// Messages posts, edits and deletes messages on behalf of interactions,
// firing the usual gateway events. Errors wrap ErrUnknownMessage,
// ErrUnknownChannel or ErrUnavailable; content rules (length) are checked
// by the bot platform before the call.
type Messages interface {
	CreateMessage(ctx context.Context, m NewMessage) (wire.Message, error)
	EditMessage(ctx context.Context, e MessageEdit) (wire.Message, error)
	GetMessage(ctx context.Context, channelID, messageID snowflake.ID) (wire.Message, error)
	// DeleteMessage deletes a message; ephemeralTo is its recipient when
	// it is ephemeral (0 otherwise).
	DeleteMessage(ctx context.Context, channelID, messageID, ephemeralTo snowflake.ID) error
}

// Tokens mints and revokes user tokens; *auth.Issuer implements it.
type Tokens interface {
	Mint(u store.User) string
	Revoke(ctx context.Context, userID snowflake.ID) error
}

// Doer sends outbound HTTP requests to bot-chosen URLs. Production uses
// the egress client (runtime/adapters/egress, *egress.Client) with no allowlist: it
// validates every resolved address before it connects and refuses
// redirects. Tests use a plain *http.Client, because egress denies the
// loopback address their bot endpoint listens on.
type Doer interface {
	Do(r *http.Request) (*http.Response, error)
}

// IDSource mints snowflakes; *snowflake.Generator implements it.
type IDSource interface {
	Next() (snowflake.ID, error)
}

// Resolver looks up host names; *net.Resolver implements it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the function from running; it reports whether it did.
	Stop() bool
}

// Clock tells time and schedules functions; tests inject a fake.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
