package gatewayrole

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// GuildBackend is the gateway.Backend on a guild service that runs every
// guild the process's sessions subscribe to (`concord dev`, and tests
// that put a gateway in front of one guild service). The adapter lives
// here, with the role that joins the two, so the domain's guild package
// knows nothing of the gateway above it.
type GuildBackend struct {
	Service *guild.Service
}

var _ gateway.Backend = GuildBackend{}

// Identify implements gateway.Backend.
func (b GuildBackend) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	r, err := b.Service.Identify(ctx, token, s)
	return r, identifyError(err)
}

// Subscribe implements gateway.Backend.
func (b GuildBackend) Subscribe(ctx context.Context, s event.Session) error {
	return b.Service.Subscribe(ctx, s)
}

// Disconnect implements gateway.Backend.
func (b GuildBackend) Disconnect(ctx context.Context, s event.Session) {
	b.Service.Disconnect(ctx, s)
}

// identifyError translates the guild tier's identify errors into the
// gateway's sentinels, which pick the close code; the guild's error stays
// wrapped for the log.
func identifyError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, guild.ErrAuthenticationFailed):
		return fmt.Errorf("%w: %w", gateway.ErrAuthenticationFailed, err)
	case errors.Is(err, guild.ErrInvalidIntents):
		return fmt.Errorf("%w: %w", gateway.ErrInvalidIntents, err)
	case errors.Is(err, guild.ErrInvalidShard):
		return fmt.Errorf("%w: %w", gateway.ErrInvalidShard, err)
	}
	return err
}
