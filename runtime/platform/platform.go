package platform

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store"
)

// Platform is a running `concord dev`: an app.Node running every role
// of the role tables in one process.
type Platform struct {
	*app.Node

	// What the in-package tests reach, from the node.
	store      store.Store
	auth       *auth.Issuer
	guilds     *guild.Service
	gateway    *gateway.Node
	registry   *prometheus.Registry
	readStates *readstaterole.Backend
	seams      *role.Seams
	bots       *apirole.Bots
	reads      struct{ outbox *outbox.Outbox }

	// DevToken is the dev user's token when Config.DevUser is set.
	DevToken string
}

// New opens the backends and builds every role (app.Open with every
// role of the tables when cfg names none). It binds cfg.HTTP; Serve
// serves on it, Close releases everything.
func New(ctx context.Context, cfg Config) (*Platform, error) {
	if len(cfg.Roles) == 0 {
		cfg.Roles = app.DefaultTables().Names()
	}
	n, err := app.Open(ctx, cfg, app.Options{})
	if err != nil {
		return nil, fmt.Errorf("platform: %w", err)
	}
	p := &Platform{Node: n, store: n.Store(), auth: n.Auth(), guilds: n.Guilds(), gateway: n.Gateway(), registry: n.Metrics(),
		readStates: n.ReadStates(), seams: n.Seams(), bots: n.Bots(), DevToken: n.DevToken()}
	if ev := n.Events(); ev != nil {
		p.reads.outbox = ev.Outbox
	}
	return p, nil
}

// Serve serves until ctx ends, then shuts down gracefully within
// Config.ShutdownTimeout (app.Node.Serve).
func (p *Platform) Serve(ctx context.Context) error {
	if err := p.Node.Serve(ctx); err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	return nil
}
