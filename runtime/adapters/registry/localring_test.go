package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func newEtcd(t *testing.T) func() registry.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, endpoint, err := etcd.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return func() registry.Registry {
		r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
}

func awaitChange(t *testing.T, ch <-chan registry.Change, ok func(registry.Change) bool) registry.Change {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case c, open := <-ch:
			if !open {
				t.Fatal("Changes closed")
			}
			if ok(c) {
				return c
			}
		case <-deadline:
			t.Fatal("no matching ring change")
		}
	}
}

func TestLocalRingFollowsRegistry(t *testing.T) {
	open := newEtcd(t)
	ctx := context.Background()
	guilds, gateway := open(), open()
	n1 := registry.Node{Name: "guild-1", Roles: []string{registry.RoleGuild}, Addr: "127.0.0.1:1"}
	g1, err := guilds.Register(ctx, n1)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := registry.NewLocalRing(ctx, gateway, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Close()
	id := snowflake.ID(123456789)
	if n, ok := lr.Owner(id); !ok || n.Name != "guild-1" || n.Addr != "127.0.0.1:1" {
		t.Fatalf("Owner with one node = %+v, %v", n, ok)
	}
	cctx, cancel := context.WithCancel(ctx)
	changes := lr.Changes(cctx)

	// A second node takes about half the guilds; Moved names exactly the
	// guilds whose owner differs.
	if _, err := guilds.Register(ctx, registry.Node{Name: "guild-2", Roles: []string{registry.RoleGuild}, Addr: "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	c := awaitChange(t, changes, func(c registry.Change) bool { return c.New.Len() == 2 })
	moved := 0
	for i := range snowflake.ID(1000) {
		o, _ := c.Old.Owner(i)
		n, _ := c.New.Owner(i)
		if c.Moved(i) != (o.Name != n.Name) {
			t.Fatalf("Moved(%d) disagrees with the views", i)
		}
		if c.Moved(i) {
			moved++
			if o.Name != "guild-1" || n.Name != "guild-2" {
				t.Fatalf("guild %d moved %s → %s", i, o.Name, n.Name)
			}
		}
	}
	if moved < 300 || moved > 700 {
		t.Fatalf("%d of 1000 guilds moved to the second node", moved)
	}

	// A pin wins over the ring; draining takes the node off the ring.
	owner, _ := lr.Owner(id)
	other := "guild-1"
	if owner.Name == other {
		other = "guild-2"
	}
	if err := gateway.Pin(ctx, id, other); err != nil {
		t.Fatal(err)
	}
	awaitChange(t, changes, func(c registry.Change) bool { n, _ := c.New.Owner(id); return n.Name == other })
	if err := gateway.Unpin(ctx, id); err != nil {
		t.Fatal(err)
	}
	awaitChange(t, changes, func(c registry.Change) bool { n, _ := c.New.Owner(id); return n.Name == owner.Name })
	if err := gateway.SetDraining(ctx, "guild-2", true); err != nil {
		t.Fatal(err)
	}
	c = awaitChange(t, changes, func(c registry.Change) bool { n, _ := c.New.Node("guild-2"); return n.Draining })
	for i := range snowflake.ID(1000) {
		if n, _ := c.New.Owner(i); n.Name != "guild-1" {
			t.Fatalf("guild %d still on draining node %s", i, n.Name)
		}
	}
	if _, ok := lr.Node("guild-2"); !ok {
		t.Fatal("a draining node left the directory")
	}
	if err := gateway.SetDraining(ctx, "guild-2", false); err != nil {
		t.Fatal(err)
	}
	awaitChange(t, changes, func(c registry.Change) bool { return c.New.Ring().Len() == 2 })

	// The first node leaves: everything is on guild-2.
	if err := g1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c = awaitChange(t, changes, func(c registry.Change) bool { return c.New.Len() == 1 })
	if n, _ := c.New.Owner(id); n.Name != "guild-2" {
		t.Fatalf("owner after leave = %s", n.Name)
	}
	cancel()
	for range changes {
	}
}

func TestLocalRingConflatesChanges(t *testing.T) {
	open := newEtcd(t)
	ctx := context.Background()
	reg := open()
	lr, err := registry.NewLocalRing(ctx, reg, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	changes := lr.Changes(ctx)
	probe := lr.Changes(ctx)
	start := lr.View()
	// Nobody reads while five nodes join; the merged change still starts
	// from the view the subscriber last saw.
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if _, err := reg.Register(ctx, registry.Node{Name: name, Roles: []string{registry.RoleGuild}, Addr: "x:1"}); err != nil {
			t.Fatal(err)
		}
	}
	awaitChange(t, probe, func(c registry.Change) bool { return c.New.Len() == 5 })
	c := <-changes
	if c.Old != start {
		t.Fatalf("first change starts at revision %d, want the subscription's view %d", c.Old.Revision, start.Revision)
	}
	prev := c.New
	for prev.Len() < 5 {
		c = <-changes
		if c.Old != prev {
			t.Fatal("changes do not chain")
		}
		prev = c.New
	}
	lr.Close()
	if _, open := <-changes; open {
		t.Fatal("Changes open after Close")
	}
}
