package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// GuildRing is a registry on an embedded etcd and a LocalRing over its
// guild nodes: the fixture of tests of what routes a guild to its owner.
// Join and Leave return once the ring has seen the change, so a test
// never races the registry's watch.
type GuildRing struct {
	t testing.TB
	// Reg is the registry the nodes register in.
	Reg *etcdreg.Registry
	// Ring is the guild ring over Reg.
	Ring *registry.LocalRing
}

// NewGuildRing starts an embedded etcd and a guild ring over it, both
// closed when the test ends.
func NewGuildRing(t testing.TB) *GuildRing {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := Registry(t)
	ring, err := registry.NewLocalRing(ctx, reg, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatalf("guild ring: %v", err)
	}
	t.Cleanup(ring.Close)
	return &GuildRing{t: t, Reg: reg, Ring: ring}
}

// Join registers n (with the guild role when n.Roles is empty) and waits
// until the ring shows it.
func (g *GuildRing) Join(n registry.Node) registry.Registration {
	g.t.Helper()
	if len(n.Roles) == 0 {
		n.Roles = []string{registry.RoleGuild}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changes := g.Ring.Changes(ctx)
	r, err := g.Reg.Register(ctx, n)
	if err != nil {
		g.t.Fatalf("register %s: %v", n.Name, err)
	}
	g.await(changes, n.Name, true)
	return r
}

// Leave deregisters the node name registered as r and waits until the
// ring drops it.
func (g *GuildRing) Leave(name string, r registry.Registration) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changes := g.Ring.Changes(ctx)
	if err := r.Close(ctx); err != nil {
		g.t.Fatalf("deregister %s: %v", name, err)
	}
	g.await(changes, name, false)
}

// await waits on changes until the ring has (or, !present, lacks) name;
// changes closing (its context ending) fails the test.
func (g *GuildRing) await(changes <-chan registry.Change, name string, present bool) {
	g.t.Helper()
	for {
		if _, ok := g.Ring.Node(name); ok == present {
			return
		}
		if _, ok := <-changes; !ok {
			g.t.Fatalf("the guild ring never showed %s present=%v", name, present)
		}
	}
}
