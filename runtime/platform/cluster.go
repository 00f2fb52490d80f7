package platform

import (
	"context"

	"github.com/concord-chat/concord/runtime/store"
)

// These entry points let runtime/cluster, which runs the roles as
// separate processes, share the single-process wiring's choices.

// OpenStore opens the store cfg.Store names with the embedded backends
// this package knows (pebble:DIR), after filling cfg's defaults.
func OpenStore(ctx context.Context, cfg Config) (store.Store, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	return openStore(ctx, cfg)
}

// ServerKey returns the token-signing key: cfg.ServerKey when set (at
// least 32 bytes), else the key kept in <DataDir>/server.key, created on
// first start. Processes of one cluster must share the key.
func ServerKey(cfg Config) ([]byte, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	return serverKey(cfg)
}
