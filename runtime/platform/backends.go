package platform

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/store"
)

// OpenStore opens the store cfg.Store names (app.OpenStore), after
// filling cfg's defaults.
func OpenStore(ctx context.Context, cfg Config) (store.Store, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	return openStore(ctx, cfg)
}

// openStore opens the store of a completed cfg.
func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	s, err := app.OpenStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	return s, nil
}

// ServerKey returns the token-signing key (app.ServerKey), after filling
// cfg's defaults: cfg.ServerKey when set, else the key kept in
// <DataDir>/server.key, created on first start. Processes of one cluster
// must share the key.
func ServerKey(cfg Config) ([]byte, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	k, err := app.ServerKey(cfg)
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	return k, nil
}
