// Package etcdfleet implements fleet.RegistryProvider over the runtime's
// registry (runtime/adapters/registry/etcd), so the operator's pins, draining marks
// and relay lists land where guild, gateway and API nodes watch for them:
//
//   - MarkDraining / ClearDraining → registry SetDraining (a node that is
//     not live has nothing to drain and is skipped);
//   - PinGuild / UnpinGuild → registry Pin / Unpin (pins/<guild id>);
//   - GuildOwner → the guild ring of the registry's current snapshot: live,
//     non-draining, non-dedicated guild nodes (registry.OnRing) with pins
//     to live nodes applied first, as every LocalRing computes it;
//   - SetRelays → kv "relays/<guild id>", a JSON list of host:port.
package etcdfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// RelaysKey is the registry kv key holding a guild's relay endpoints.
func RelaysKey(guildID string) string { return "relays/" + guildID }

// Provider opens one registry client per etcd endpoint set and prefix and
// keeps it for the operator's lifetime.
type Provider struct {
	mu      sync.Mutex
	clients map[string]*Registry
	// New opens a runtime registry; default etcd.New.
	New func(cfg etcd.Config) (registry.Registry, error)
}

var _ fleet.RegistryProvider = (*Provider)(nil)

// Registry returns the cluster's registry.
func (p *Provider) Registry(_ context.Context, c fleet.ClusterKey) (fleet.Registry, error) {
	if len(c.Endpoints) == 0 {
		return nil, fmt.Errorf("etcdfleet: ConcordCluster %s/%s has no etcd endpoints", c.Namespace, c.Name)
	}
	key := strings.Join(c.Endpoints, ",") + "|" + c.Prefix
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.clients[key]; ok {
		return r, nil
	}
	open := p.New
	if open == nil {
		open = func(cfg etcd.Config) (registry.Registry, error) { return etcd.New(cfg) }
	}
	reg, err := open(etcd.Config{Endpoints: c.Endpoints, Prefix: c.Prefix})
	if err != nil {
		return nil, fmt.Errorf("etcdfleet: open registry of %s/%s: %w", c.Namespace, c.Name, err)
	}
	if p.clients == nil {
		p.clients = map[string]*Registry{}
	}
	r := &Registry{Reg: reg}
	p.clients[key] = r
	return r, nil
}

// Close closes every registry client.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for k, r := range p.clients {
		errs = append(errs, r.Reg.Close())
		delete(p.clients, k)
	}
	return errors.Join(errs...)
}

// Registry adapts a runtime registry to fleet.Registry.
type Registry struct {
	Reg registry.Registry
}

var _ fleet.Registry = (*Registry)(nil)

func guildKey(guildID string) (snowflake.ID, error) {
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcdfleet: guild id %q: %w", guildID, err)
	}
	return snowflake.ID(id), nil
}

// MarkDraining sets the node's draining flag.
func (r *Registry) MarkDraining(ctx context.Context, _, pod string) error {
	if err := r.Reg.SetDraining(ctx, pod, true); err != nil && !errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("etcdfleet: mark %s draining: %w", pod, err)
	}
	return nil
}

// ClearDraining clears the node's draining flag.
func (r *Registry) ClearDraining(ctx context.Context, _, pod string) error {
	if err := r.Reg.SetDraining(ctx, pod, false); err != nil && !errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("etcdfleet: clear draining of %s: %w", pod, err)
	}
	return nil
}

// PinGuild pins the guild to node.
func (r *Registry) PinGuild(ctx context.Context, guildID, node string) error {
	id, err := guildKey(guildID)
	if err != nil {
		return err
	}
	return r.Reg.Pin(ctx, id, node)
}

// UnpinGuild removes the guild's pin.
func (r *Registry) UnpinGuild(ctx context.Context, guildID string) error {
	id, err := guildKey(guildID)
	if err != nil {
		return err
	}
	return r.Reg.Unpin(ctx, id)
}

// GuildOwner computes the guild's owner on the registry's current ring.
func (r *Registry) GuildOwner(ctx context.Context, guildID string) (string, error) {
	id, err := guildKey(guildID)
	if err != nil {
		return "", err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := r.Reg.Watch(wctx, registry.RoleGuild)
	if err != nil {
		return "", fmt.Errorf("etcdfleet: watch guild nodes: %w", err)
	}
	var snap registry.Snapshot
	select {
	case s, ok := <-ch:
		if !ok {
			return "", fmt.Errorf("etcdfleet: guild watch closed")
		}
		snap = s
	case <-ctx.Done():
		return "", ctx.Err()
	}
	live := map[string]bool{}
	var members []string
	for _, n := range snap.Nodes {
		live[n.Name] = true
		if registry.OnRing(n) {
			members = append(members, n.Name)
		}
	}
	pins := map[uint64]string{}
	for g, node := range snap.Pins {
		if live[node] {
			pins[uint64(g)] = node
		}
	}
	owner, ok := registry.NewRing(members, pins, 0).Owner(uint64(id))
	if !ok {
		return "", fleet.ErrNotFound
	}
	return owner, nil
}

// SetRelays publishes the guild's relay endpoints (or removes them).
func (r *Registry) SetRelays(ctx context.Context, guildID string, endpoints []string) error {
	if _, err := guildKey(guildID); err != nil {
		return err
	}
	if len(endpoints) == 0 {
		return r.Reg.Delete(ctx, RelaysKey(guildID))
	}
	b, err := json.Marshal(endpoints)
	if err != nil {
		return err
	}
	return r.Reg.Put(ctx, RelaysKey(guildID), b, registry.Persistent)
}
