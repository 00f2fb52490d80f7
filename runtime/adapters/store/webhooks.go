package store

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Webhook types, as Discord numbers them.
const (
	WebhookIncoming    = 1
	WebhookApplication = 3
)

// Webhook is a channel's incoming webhook. The token is never stored:
// TokenHash is its SHA-256, compared in constant time when a token route
// is called.
type Webhook struct {
	ID        snowflake.ID
	GuildID   snowflake.ID
	ChannelID snowflake.ID
	// CreatorID is the user who created it.
	CreatorID snowflake.ID
	Type      int
	Name      string
	Avatar    string
	TokenHash []byte
	CreatedAt time.Time
}

// Webhooks stores webhooks, by id and by guild. Writes are durable on
// return; PutWebhook is an upsert (a webhook moved to another channel of
// its guild is rewritten whole).
type Webhooks interface {
	PutWebhook(ctx context.Context, w Webhook) error
	// GetWebhook returns a webhook or ErrNotFound.
	GetWebhook(ctx context.Context, id snowflake.ID) (Webhook, error)
	// DeleteWebhook removes a webhook; ErrNotFound when there is none.
	DeleteWebhook(ctx context.Context, id snowflake.ID) error
	// GuildWebhooks lists a guild's webhooks by id ascending.
	GuildWebhooks(ctx context.Context, guildID snowflake.ID) ([]Webhook, error)
}
