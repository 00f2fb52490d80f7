package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// openRegistry connects to etcd (etcd://host:port[,host:port...][/prefix],
// keys under /prefix/, default /concord/) or, for --registry=embedded,
// starts an embedded etcd in <data-dir>/etcd that only this process uses
// (the gateway, api and guild roles in one process). stop releases what openRegistry started.
func openRegistry(ctx context.Context, cfg Config) (reg registry.Registry, stop func(), err error) {
	var endpoints []string
	var prefix string
	stop = func() {}
	switch {
	case strings.HasPrefix(cfg.Registry, "etcd://"):
		hosts, path, _ := strings.Cut(strings.TrimPrefix(cfg.Registry, "etcd://"), "/")
		if path != "" {
			prefix = "/" + path
		}
		for _, h := range strings.Split(hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				endpoints = append(endpoints, "http://"+h)
			}
		}
		if len(endpoints) == 0 {
			return nil, nil, fmt.Errorf("--registry=%s names no host", cfg.Registry)
		}
	case cfg.Registry == "" || cfg.Registry == "embedded":
		if !coreAll(cfg) {
			return nil, nil, errors.New("--registry=embedded serves this process only; " +
				"nodes running some roles need a shared etcd: --registry=etcd://host:port")
		}
		dir := filepath.Join(cfg.DataDir, "etcd")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("etcd dir: %w", err)
		}
		estop, ep, err := etcdreg.StartEmbedded(ctx, dir, "")
		if err != nil {
			return nil, nil, err
		}
		endpoints, stop = []string{ep}, estop
	default:
		return nil, nil, fmt.Errorf("unknown --registry %q (want etcd://host:port or embedded)", cfg.Registry)
	}
	r, err := etcdreg.New(etcdreg.Config{
		Endpoints: endpoints,
		Prefix:    prefix,
		LeaseTTL:  cfg.LeaseTTL,
		Logger:    cfg.Logger.With("component", "registry"),
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("registry: %w", err)
	}
	return r, stop, nil
}

// register publishes n, waiting out the lease of a previous process of
// the same name that was killed (ErrExists until it expires, at most
// about one TTL).
func register(ctx context.Context, reg registry.Registry, n registry.Node, ttl time.Duration) (registry.Registration, error) {
	deadline := time.Now().Add(2*ttl + time.Second)
	for {
		r, err := reg.Register(ctx, n)
		if err == nil || !errors.Is(err, registry.ErrExists) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("register %s: %w", n.Name, err)
			}
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("register %s: %w", n.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkUnique fails when another live node uses this node's snowflake
// worker/process pair (ids minted by both could collide), or when this
// node uses a Pebble store and any other node is live.
func checkUnique(ctx context.Context, reg registry.Registry, cfg Config) error {
	mine := snowflakeLabel(cfg.Worker, cfg.Process)
	return eachLiveNode(ctx, reg, func(n registry.Node) error {
		if n.Name == cfg.Node {
			return nil
		}
		if n.Labels[labelSnowflake] == mine {
			return fmt.Errorf("node %s already mints ids as worker/process %s; give each process its own --worker/--process, or --snowflake-id=auto", n.Name, mine)
		}
		if !sharedStore(cfg.Store) && !storeless(cfg) && !storeless(Config{Roles: n.Roles}) {
			return fmt.Errorf("node %s is live but this node's store %q is local to one process; use --store=cassandra://host:port/keyspace", n.Name, cfg.Store)
		}
		return nil
	})
}

// eachLiveNode calls fn for every live node of every role (a node with
// several roles once per role) in the registry's current snapshots,
// stopping at the first error.
func eachLiveNode(ctx context.Context, reg registry.Registry, fn func(registry.Node) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, role := range DefaultTables().Names() {
		ch, err := reg.Watch(wctx, role)
		if err != nil {
			return fmt.Errorf("watch %s: %w", role, err)
		}
		var snap registry.Snapshot
		select {
		case snap = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, n := range snap.Nodes {
			if err := fn(n); err != nil {
				return err
			}
		}
	}
	return nil
}

func snowflakeLabel(worker, process int) string { return fmt.Sprintf("%d/%d", worker, process) }
