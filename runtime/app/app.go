// Package app is Concord's composition root: one Node is one Concord
// process, `concord dev` (every role of the role tables) and `concord
// serve --roles=...` (the roles one node names) alike, opened by Open,
// which both commands of runtime/cmd/concord call directly. Check is the one set of rules
// for a configuration and decides the mode: a process running every role
// keeps every seam in process and opens no registry; one running some
// roles registers in etcd, claims its snowflake pair and reaches the
// other roles over gRPC. Both modes open the backends the same way (the
// store — Pebble, or Cassandra behind the coalescing data service —, the
// token-signing key, the event log with its outbox), build the roles in
// one wiring.Build pass over the role tables, serve one HTTP route table
// (web client, root-path WebSocket upgrade, /metrics, /healthz, /readyz,
// /admin behind the admin token), run the roles' parts in one
// lifecycle.Group that stops in reverse, and serve and shut down through
// one sequence (Process.Serve: not ready, leave, drain the gateway, shut
// the servers down).
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/apirole"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/gatewayrole"
	"github.com/concord-chat/concord/runtime/services/guildrole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Process is the role side of one Concord process: its cross-role
// seams, the lifecycle group the roles' parts run in, and the muxes
// their HTTP routes and admin endpoints go to. The zero value with Seams
// set is ready to use.
type Process struct {
	// Seams are the process's cross-role seams (wiring.Seams), shared by
	// every role it builds; closed by Stop after the parts.
	Seams *wiring.Seams
	// Group runs the roles' parts: started by Start in the order they
	// were added, stopped in reverse by Stop.
	Group lifecycle.Group
	// Mux holds the roles' HTTP routes, Admin their admin endpoints
	// (served under /admin/ behind the admin token).
	Mux, Admin *http.ServeMux

	// gateway is the gateway role's node when Build built one: Serve
	// drains it at shutdown.
	gateway *gateway.Node
}

// NewProcess returns a Process on seams (nil: a fresh set).
func NewProcess(seams *wiring.Seams) *Process {
	if seams == nil {
		seams = &wiring.Seams{}
	}
	return &Process{Seams: seams, Mux: http.NewServeMux(), Admin: http.NewServeMux()}
}

// Tables are the role tables a process builds from, in build order: the
// chat roles, then the table roles (voice, live comments).
type Tables struct {
	Chat, Table []wiring.Role
}

// DefaultTables are the tables of package catalog.
func DefaultTables() Tables { return Tables{Chat: catalog.Chat, Table: catalog.Table} }

// Built is what the roles built in a process provide that the process
// serves or exposes: each nil when its role does not run here.
type Built struct {
	// Guilds is the guild role's service.
	Guilds *guild.Service
	// Gateway is the gateway role's node: the root path's WebSocket
	// upgrade goes to it and the process drains it at shutdown.
	Gateway *gateway.Node
	// REST is the handler on /api/ (the api role's, or the guild role's
	// REST surface on a node without the api role).
	REST http.Handler
	// Bots is the bot platform (on a process running the guild role).
	Bots *apirole.Bots
}

// Build builds, in one wiring.Build pass over the chat roles and then the
// table roles, every role want reports the process runs, with parts,
// and looks up what they provide. parts.Seams and parts.Admin must be
// the Process's (nil ones are set to them).
func (p *Process) Build(ctx context.Context, t Tables, want func(name string) bool, parts wiring.Parts) (Built, error) {
	if parts.Seams == nil {
		parts.Seams = p.Seams
	}
	if parts.Admin == nil {
		parts.Admin = p.Admin
	}
	if parts.Seams != p.Seams {
		return Built{}, errors.New("app: the roles' parts carry other seams than the process's")
	}
	if err := wiring.Build(ctx, slices.Concat(t.Chat, t.Table), want, parts, p.Mux, &p.Group); err != nil {
		return Built{}, err
	}
	var b Built
	b.Guilds, _ = wiring.Lookup(p.Seams, wiring.GuildService)
	b.Gateway, _ = wiring.Lookup(p.Seams, wiring.GatewayNode)
	b.REST, _ = wiring.Lookup(p.Seams, wiring.REST)
	b.Bots, _ = wiring.Lookup(p.Seams, apirole.BotsKey)
	p.gateway = b.Gateway
	if want(guildrole.Name) && b.Guilds == nil {
		return b, errors.New("the guild role provided no guild service")
	}
	if want(gatewayrole.Name) && b.Gateway == nil {
		return b, errors.New("the gateway role provided no gateway node")
	}
	return b, nil
}

// Start starts the roles' parts; they run until Stop.
func (p *Process) Start(ctx context.Context) { p.Group.Start(ctx) }

// Ready reports nil when every part is ready, else why not.
func (p *Process) Ready() error { return p.Group.Ready() }

// Stop stops the parts in reverse order (within ctx), then runs closers
// (what the process opened for the roles and the parts used: an
// outbox, a data client), then closes what the roles shared through the
// seams (the rings and clients they opened and the chat roles'
// services), after everything that calls them.
func (p *Process) Stop(ctx context.Context, closers ...func() error) error {
	errs := []error{p.Group.Stop(ctx)}
	for _, c := range closers {
		errs = append(errs, c())
	}
	if err := p.Seams.Close(); err != nil {
		errs = append(errs, fmt.Errorf("seams: %w", err))
	}
	return errors.Join(errs...)
}
