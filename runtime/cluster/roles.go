package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/store"
)

// Role is a role built from the table below rather than by New itself:
// the way a new domain package (voice, live comments, ...) joins the
// process. Build constructs the role once from the node's configuration
// and shared parts, and contributes through the Builder its HTTP routes,
// its listeners and its parts (loops to run, resources to close), which
// the node's lifecycle.Group starts in order and stops in reverse. Adding
// a role is one file declaring its Role and one line in tableRoles.
type Role struct {
	// Name is the --roles name.
	Name string
	// Build constructs the role.
	Build func(ctx context.Context, b *Builder) error
}

// tableRoles are the roles built through Role.
var tableRoles = []Role{}

// Builder is what a Role builds from and contributes to.
type Builder struct {
	// Config is the node's configuration, defaults applied.
	Config Config
	// Logger is the node's logger.
	Logger *slog.Logger
	// Metrics is the node's metrics registry.
	Metrics prometheus.Registerer
	// Registry is the cluster registry (etcd).
	Registry registry.Registry
	// Store is the node's store (message methods through the data
	// service).
	Store store.Store

	mux   *http.ServeMux
	group *lifecycle.Group
	role  string
}

// Handle serves pattern on the node's HTTP listener (REST and gateway
// patterns are taken; a role uses its own prefix).
func (b *Builder) Handle(pattern string, h http.Handler) { b.mux.Handle(pattern, h) }

// Add contributes a part to the node's lifecycle group.
func (b *Builder) Add(p lifecycle.Part) error {
	p.Name = b.role + "/" + p.Name
	return b.group.Add(p)
}

// Listen binds a listener the role declares (a media port, say), closed
// with the node.
func (b *Builder) Listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: role %s: listen %s %s: %w", b.role, network, addr, err)
	}
	if err := b.group.Add(lifecycle.Part{Name: b.role + "/listener " + addr, Close: l.Close}); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// buildTableRoles builds the table roles this node runs onto mux and the
// node's group.
func (n *Node) buildTableRoles(ctx context.Context, st store.Store, mux *http.ServeMux) error {
	for _, r := range tableRoles {
		if !has(n.cfg, r.Name) {
			continue
		}
		b := &Builder{Config: n.cfg, Logger: n.log.With("role", r.Name), Metrics: n.metrics, Registry: n.reg, Store: st,
			mux: mux, group: &n.group, role: r.Name}
		if err := r.Build(ctx, b); err != nil {
			return fmt.Errorf("cluster: role %s: %w", r.Name, err)
		}
	}
	return nil
}
