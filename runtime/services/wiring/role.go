// Package wiring is how a domain joins a Concord process once for both
// modes: a Role is built from the process's configuration and shared
// parts by `concord dev` (every role, in one process) and by `concord
// serve --roles=...` (the roles a node names), through the same Build
// function. The role contributes its HTTP routes, listeners and parts
// (loops to run, readiness, resources to close) through the Builder; the
// process starts the parts in order and stops them in reverse.
//
// A role never asks which command it runs in. What it consumes from the
// process or from another role is a port (ports.go), a typed key of the
// process's Seams: the root (runtime/app) gives its ports once, choosing
// for each whether it is in process or remote, before any role is built;
// a role gives the ports it offers as it builds. Each Role declares the
// ports it needs and gives, the build order follows from them (Order),
// and a process whose roles need a port nothing gives does not start.
//
// The package was called role; it is wiring so that no reader takes it
// for a guild's roles (store.Role, runtime/domain/guild/roles.go). Its
// Role is a process role, a name of --roles.
package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// Role is one --roles name and how to build it.
type Role struct {
	// Name is the --roles name.
	Name string
	// Needs are the ports (Key.Name) the role consumes: each must be
	// given by the root or by a role built before it, or the process
	// does not start (Order).
	Needs []string
	// Uses are the ports the role consumes when the process has them:
	// a role giving one is built before this one, and without one the
	// role runs without it.
	Uses []string
	// Gives are the ports the role gives the roles built after it.
	Gives []string
	// Build constructs the role.
	Build func(ctx context.Context, b *Builder) error
}

// Parts are the shared parts of the process a role builds from.
type Parts struct {
	// Config is the process's configuration, defaults applied.
	Config config.Config
	// Logger is the process's logger.
	Logger *slog.Logger
	// Metrics is the process's metrics registry.
	Metrics prometheus.Registerer
	// Registry is the cluster registry (etcd) of a node that has one;
	// nil when every role is in this process.
	Registry registry.Registry
	// Store is the chat store (message methods through the data
	// service where the process uses one).
	Store store.Store
	// Auth verifies the chat platform's tokens.
	Auth *auth.Issuer
	// IDs mints snowflakes unique to this process.
	IDs *snowflake.Generator
	// Counters are the process's shared counters (rate limits).
	Counters counters.Counters
	// AdminToken is the process's admin token: what guards /admin/ and
	// what a role calling another node's admin endpoints (a gateway's
	// session hand-off) sends. Empty: the process serves no admin
	// endpoints.
	AdminToken string
	// Admin is where the roles' admin endpoints go (HandleAdmin): served
	// under /admin/ behind the process's admin token, after the
	// process's own admin endpoints. Nil: the process serves none.
	Admin Mux
	// Seams hold the process's ports (ports.go): the ones the root gave
	// and the ones the roles built so far gave. One per process, shared
	// by every role it builds.
	Seams *Seams
	// GRPC is the process's gRPC services between nodes: a role serves
	// its node-to-node interface by setting its field. Nil when every
	// role is in this process, where no role is reached over gRPC.
	GRPC *transport.Services
	// ClientConfig configures the gRPC clients a role opens to reach
	// roles on other nodes (`concord serve`).
	ClientConfig transport.ClientConfig
}

// Mux is where a role's routes go: the process's HTTP listener.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Builder is what a Role builds from and contributes to.
type Builder struct {
	Parts

	mux   Mux
	group *lifecycle.Group
	role  string
}

// Handle serves pattern on the process's HTTP listener. A path has one
// owner: /api/ is the api role's, /gateway the gateway's, and the
// operational paths (/metrics, /healthz, /readyz, /livez, /admin/) the
// process's; any other role uses a prefix of its own.
func (b *Builder) Handle(pattern string, h http.Handler) { b.mux.Handle(pattern, h) }

// HandleAdmin serves pattern (under /admin/) among the process's admin
// endpoints, behind its admin token: a request without the token never
// reaches h. A pattern the process's own admin endpoints serve stays
// theirs. Without an admin mux (Parts.Admin) the route is not served.
func (b *Builder) HandleAdmin(pattern string, h http.Handler) {
	if b.Admin != nil {
		b.Admin.Handle(pattern, h)
	}
}

// Add contributes a part to the process's lifecycle group.
func (b *Builder) Add(p lifecycle.Part) error {
	p.Name = b.role + "/" + p.Name
	return b.group.Add(p)
}

// Listen binds a listener the role declares (a media port, say), closed
// with the process.
func (b *Builder) Listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("role %s: listen %s %s: %w", b.role, network, addr, err)
	}
	if err := b.group.Add(lifecycle.Part{Name: b.role + "/listener " + addr, Close: func() error { return ignoreClosed(l.Close()) }}); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// ListenPacket binds a packet listener (UDP media) the role declares,
// closed with the process.
func (b *Builder) ListenPacket(network, addr string) (net.PacketConn, error) {
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		return nil, fmt.Errorf("role %s: listen %s %s: %w", b.role, network, addr, err)
	}
	if err := b.group.Add(lifecycle.Part{Name: b.role + "/listener " + network + " " + addr, Close: func() error { return ignoreClosed(c.Close()) }}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// ignoreClosed drops the error of closing a listener its server closed
// already (an http.Server closes the listener it serves).
func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Build builds each role of table that want reports the process runs,
// in the order their ports give (Order: the ports parts.Seams holds
// already are the root's), onto mux and group.
func Build(ctx context.Context, table []Role, want func(name string) bool, parts Parts, mux Mux, group *lifecycle.Group) error {
	var run []Role
	for _, r := range table {
		if want(r.Name) {
			run = append(run, r)
		}
	}
	order, err := Order(run, parts.Seams.names())
	if err != nil {
		return err
	}
	for _, r := range order {
		p := parts
		if p.Logger != nil {
			p.Logger = p.Logger.With("role", r.Name)
		}
		b := &Builder{Parts: p, mux: mux, group: group, role: r.Name}
		if err := r.Build(ctx, b); err != nil {
			return fmt.Errorf("role %s: %w", r.Name, err)
		}
	}
	return nil
}

// AdminHandler serves an admin request with the process's own admin
// endpoints when one of own's patterns matches it, else with the roles'
// (Parts.Admin); nil roles serves own alone. Put it behind the admin
// token.
func AdminHandler(own, roles *http.ServeMux) http.Handler {
	if roles == nil {
		return own
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// own serves the request itself (not the handler Handler returns),
		// so the pattern's path values ({id}) are set.
		if _, pattern := own.Handler(r); pattern != "" {
			own.ServeHTTP(w, r)
			return
		}
		roles.ServeHTTP(w, r)
	})
}
