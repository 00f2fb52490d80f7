package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/edge/httpserve"
)

// Serving is what Process.Serve serves and how it stops: the one
// shutdown sequence of `concord dev` and `concord serve`.
type Serving struct {
	// Server is the process's HTTP server, already serving; Errc
	// receives what its Serve (and the other servers', e.g. gRPC and
	// the admin listener's) returned.
	Server *http.Server
	Errc   <-chan error
	// Admin is the admin listener's server (nil: none), shut down after
	// the drain and before Server; its shutdown error is not reported:
	// it carries only operational endpoints.
	Admin *http.Server
	// Logger logs the shutdown; Timeout bounds it (config's
	// ShutdownTimeout).
	Logger  *slog.Logger
	Timeout time.Duration
	// NotReady makes /readyz answer 503: called first when the process
	// stops for any reason but a server error.
	NotReady func()
	// Stops are further reasons to stop: when one's channel closes, the
	// process stops with its Err (serve: the snowflake claim was lost).
	Stops []Stop
	// Leave runs first in the graceful shutdown, within its timeout,
	// before the gateway drains (serve: leave the registry, so the
	// node's guilds move at once).
	Leave func(ctx context.Context)
	// Abort, when set, is the whole shutdown after a failure (a failed
	// part or a Stop): it runs after NotReady and Serve returns the
	// failure at once, without draining (serve: leave the registry and
	// let Close stop the parts). Nil: a failure shuts down gracefully,
	// as the end of ctx does, and Serve then reports it (dev).
	Abort func()
}

// Stop is one further reason for a process to stop (Serving.Stops).
type Stop struct {
	// C is closed when the process must stop.
	C <-chan struct{}
	// Err is what Serve reports then.
	Err error
}

// Serve waits until ctx ends, a part of the process fails, a Stop fires
// or a server fails; then (but after a server error, which it returns
// at once) it marks the process not ready and, unless s.Abort handles a
// failure, shuts down gracefully within s.Timeout: s.Leave, the drain of
// the gateway role's node (when the process runs one) beside the parts'
// drains (lifecycle.Part.Drain), the admin
// server's shutdown, then the HTTP server's. It returns the server
// error ("serve: ..."), the failure, or the HTTP server's shutdown error
// ("shutdown: ..."; its deadline passing is not one). The parts keep
// running: Stop stops them.
func (p *Process) Serve(ctx context.Context, s Serving) error {
	done := make(chan struct{})
	defer close(done)
	stopped := make(chan error, len(s.Stops))
	for _, st := range s.Stops {
		go func() {
			select {
			case <-st.C:
				stopped <- st.Err
			case <-done:
			}
		}()
	}
	var failed error
	select {
	case err := <-s.Errc:
		return fmt.Errorf("serve: %w", err)
	case failed = <-p.Group.Failed():
		s.Logger.Error("a role failed; shutting down", "err", failed)
	case failed = <-stopped:
		s.Logger.Error("shutting down", "err", failed)
	case <-ctx.Done():
	}
	if s.NotReady != nil {
		s.NotReady()
	}
	if failed != nil && s.Abort != nil {
		s.Abort()
		return failed
	}
	s.Logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	if s.Leave != nil {
		s.Leave(sctx)
	}
	// The chat gateway's sessions and the parts' own drains (the live
	// gateway's viewers) go at once, within the one timeout.
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		p.Group.Drain(sctx)
	}()
	if p.gateway != nil {
		p.gateway.Drain(sctx)
	}
	<-drained
	if s.Admin != nil {
		_ = s.Admin.Shutdown(sctx)
	}
	if err := s.Server.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return failed
}

// Serve starts the admin and gRPC servers, registers the node (with a
// registry), reports ready and serves until ctx ends or a part fails; then
// it shuts down as Process.Serve does (not ready, leave the registry so
// the node's guilds move at once, drain the gateway, shut the servers
// down within ShutdownTimeout). Close releases the rest.
func (n *Node) Serve(ctx context.Context) error {
	serving := n.cfg.ServingConfig()
	var adminSrv *http.Server
	if n.adminL != nil {
		adminSrv = httpserve.NewServer(n.routes.AdminHandler(), serving)
		go func() { n.srvErr <- httpserve.Serve(adminSrv, n.adminL, serving) }()
	}
	if n.grpc != nil {
		go func() { n.srvErr <- n.grpc.Serve(n.grpcL) }()
	}
	s := Serving{
		Server:   n.srv,
		Errc:     n.srvErr,
		Admin:    adminSrv,
		Logger:   n.log,
		Timeout:  n.cfg.ShutdownTimeout,
		NotReady: func() { n.ready.Store(false) },
	}
	if n.reg != nil {
		node := registry.Node{
			Name:     n.cfg.Node,
			Roles:    n.cfg.Roles,
			Addr:     n.advertise(n.GRPCAddr()),
			HTTPAddr: n.advertise(n.HTTPAddr()),
			Labels:   n.registryLabels(),
		}
		regn, err := register(ctx, n.reg, node, n.cfg.LeaseTTL)
		if err != nil {
			return err
		}
		n.log.Info("node registered", "roles", strings.Join(n.cfg.Roles, ","), "http", node.HTTPAddr, "grpc", node.Addr)
		// Leaving the registry first moves the node's guilds at once;
		// after a failure the node leaves it and stops (Close stops the
		// parts). A node whose snowflake pair another node claimed stops
		// before their ids collide.
		s.Leave = func(ctx context.Context) {
			if err := regn.Close(ctx); err != nil {
				n.log.Warn("leave registry", "err", err)
			}
		}
		s.Abort = func() { _ = regn.Close(context.Background()) }
		s.Stops = []Stop{{C: n.snowflakeLost, Err: fmt.Errorf("snowflake pair %s lost to another node while the registry lease lapsed: stopping before ids collide",
			snowflakeLabel(n.cfg.Worker, n.cfg.Process))}}
	}
	n.ready.Store(true)
	return n.proc.Serve(ctx, s)
}
