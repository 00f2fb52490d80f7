package guild

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// GatewayBackend adapts a Service to gateway.Backend, translating the
// guild tier's Identify errors into the gateway's sentinels.
type GatewayBackend struct {
	Service *Service
}

var _ gateway.Backend = GatewayBackend{}

// NewGatewayBackend returns the gateway.Backend of s.
func NewGatewayBackend(s *Service) GatewayBackend { return GatewayBackend{Service: s} }

// Identify implements gateway.Backend.
func (b GatewayBackend) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	r, err := b.Service.Identify(ctx, token, s)
	switch {
	case err == nil:
		return r, nil
	case errors.Is(err, ErrAuthenticationFailed):
		return r, fmt.Errorf("%w: %w", gateway.ErrAuthenticationFailed, err)
	case errors.Is(err, ErrInvalidIntents):
		return r, fmt.Errorf("%w: %w", gateway.ErrInvalidIntents, err)
	case errors.Is(err, ErrInvalidShard):
		return r, fmt.Errorf("%w: %w", gateway.ErrInvalidShard, err)
	}
	return r, err
}

// Subscribe implements gateway.Backend.
func (b GatewayBackend) Subscribe(ctx context.Context, s event.Session) error {
	return b.Service.Subscribe(ctx, s)
}

// Disconnect implements gateway.Backend.
func (b GatewayBackend) Disconnect(ctx context.Context, s event.Session) {
	b.Service.Disconnect(ctx, s)
}
