package bots

import (
	"context"
	"encoding/json"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Application flags (Discord's application.flags) that grant privileged
// gateway intents. The owner sets them with PATCH /applications/{id}.
const (
	FlagGatewayPresence       = 1 << 12
	FlagGatewayGuildMembers   = 1 << 14
	FlagGatewayMessageContent = 1 << 18
	// privilegedFlags are the flags an owner may set.
	privilegedFlags = FlagGatewayPresence | FlagGatewayGuildMembers | FlagGatewayMessageContent
)

// Application is a registered bot application. Its bot user lives in the
// main user store (store.Users) with Bot set.
type Application struct {
	ID          snowflake.ID
	Name        string
	Description string
	OwnerID     snowflake.ID
	BotUserID   snowflake.ID
	// PublicKey is the Ed25519 verify key (32 bytes).
	PublicKey []byte
	// SealedPrivateKey is the Ed25519 private key sealed with AES-GCM
	// under a key derived from the server key; never the plain key.
	SealedPrivateKey []byte
	// InteractionsEndpointURL, when set, receives interactions by signed
	// HTTP POST instead of the gateway.
	InteractionsEndpointURL string
	Flags                   int
	BotPublic               bool
	CreatedAt               time.Time
}

// Command is an application command, global (GuildID 0) or per guild.
type Command struct {
	ID            snowflake.ID
	ApplicationID snowflake.ID
	GuildID       snowflake.ID
	// Version changes with every update (a snowflake).
	Version snowflake.ID
	// Def is the validated definition.
	Def CommandDef
}

// Interaction states.
const (
	// StatePending: delivered, not yet acknowledged.
	StatePending = iota
	// StateAcknowledged: a callback was accepted.
	StateAcknowledged
	// StateTimedOut: the acknowledgement deadline passed without one.
	StateTimedOut
)

// Interaction is one invocation and its token state.
type Interaction struct {
	ID            snowflake.ID
	ApplicationID snowflake.ID
	Type          int
	GuildID       snowflake.ID
	ChannelID     snowflake.ID
	UserID        snowflake.ID
	BotUserID     snowflake.ID
	// CommandName is the invoked command's name (for messages' metadata).
	CommandName string
	// TokenMAC is the HMAC-SHA256 of the interaction token under the
	// server key; the token itself is never stored.
	TokenMAC []byte
	// MessageID is the message a component interaction came from.
	MessageID snowflake.ID
	// Data is the interaction's data object as delivered.
	Data      json.RawMessage
	CreatedAt time.Time

	State        int
	CallbackType int
	// ResponseMessageID is @original: the created response (types 4, 5)
	// or the component's message (types 6, 7).
	ResponseMessageID snowflake.ID
	// Loading is true while a deferred (type 5) response is unedited.
	Loading   bool
	Ephemeral bool
	// FollowupIDs are the messages created through the followup webhook.
	FollowupIDs []snowflake.ID
}

// Installation is a bot installed in a guild; the guild owns it.
type Installation struct {
	GuildID       snowflake.ID
	ApplicationID snowflake.ID
	BotUserID     snowflake.ID
	// RoleID is the bot's managed role, which carries Permissions.
	RoleID      snowflake.ID
	Permissions uint64
	InstalledBy snowflake.ID
	InstalledAt time.Time
}

// Store keeps the bot platform's records. Every write is durable when it
// returns nil. Missing records are ErrNotFound (wrapped).
//
// Applications are registry-class state (precious); interactions are
// short-lived (15 minutes) and may be dropped by DeleteInteractionsBefore.
type Store interface {
	// CreateApplication fails with ErrExists when the id or the bot user
	// is already bound to an application.
	CreateApplication(ctx context.Context, a Application) error
	// PutApplication overwrites an existing application (its bot user
	// must not change).
	PutApplication(ctx context.Context, a Application) error
	GetApplication(ctx context.Context, id snowflake.ID) (Application, error)
	// ApplicationByBot finds the application of a bot user.
	ApplicationByBot(ctx context.Context, botUserID snowflake.ID) (Application, error)
	// ApplicationsByOwner lists a user's applications by id.
	ApplicationsByOwner(ctx context.Context, ownerID snowflake.ID) ([]Application, error)

	// PutCommand upserts one command.
	PutCommand(ctx context.Context, c Command) error
	GetCommand(ctx context.Context, appID, guildID, commandID snowflake.ID) (Command, error)
	DeleteCommand(ctx context.Context, appID, guildID, commandID snowflake.ID) error
	// ListCommands lists the commands of one scope (guildID 0: global) by id.
	ListCommands(ctx context.Context, appID, guildID snowflake.ID) ([]Command, error)
	// ReplaceCommands atomically makes cmds the whole of one scope.
	ReplaceCommands(ctx context.Context, appID, guildID snowflake.ID, cmds []Command) error

	PutInstallation(ctx context.Context, in Installation) error
	GetInstallation(ctx context.Context, guildID, appID snowflake.ID) (Installation, error)
	DeleteInstallation(ctx context.Context, guildID, appID snowflake.ID) error
	// GuildInstallations lists a guild's installations by application id.
	GuildInstallations(ctx context.Context, guildID snowflake.ID) ([]Installation, error)

	// CreateInteraction fails with ErrExists for a taken id.
	CreateInteraction(ctx context.Context, in Interaction) error
	GetInteraction(ctx context.Context, id snowflake.ID) (Interaction, error)
	// UpdateInteraction applies fn to the stored interaction atomically
	// with respect to other updates of it and stores the result; when fn
	// returns an error nothing is written and that error is returned. fn
	// may run more than once (a store shared by several processes retries
	// it after a conflicting update), so it must change nothing but its
	// argument.
	UpdateInteraction(ctx context.Context, id snowflake.ID, fn func(*Interaction) error) (Interaction, error)
	// DeleteInteractionsBefore drops interactions whose id is below id
	// (ids sort by creation time) and returns how many it dropped.
	DeleteInteractionsBefore(ctx context.Context, id snowflake.ID) (int, error)

	Close() error
}
