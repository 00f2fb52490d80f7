package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// A dedicated node takes no share of the ring: it owns only the guilds
// pinned to it.
func TestLocalRingDedicatedNodeOwnsOnlyPins(t *testing.T) {
	open := newEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := open()
	shared := registry.Node{Name: "guild-0", Roles: []string{registry.RoleGuild}, Addr: "a:1"}
	dedicated := registry.Node{Name: "guild-pinned", Roles: []string{registry.RoleGuild}, Addr: "b:1",
		Labels: map[string]string{registry.LabelDedicated: "42"}}
	for _, n := range []registry.Node{shared, dedicated} {
		if _, err := reg.Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	const pinned = snowflake.ID(42)
	if err := reg.Pin(ctx, pinned, dedicated.Name); err != nil {
		t.Fatal(err)
	}
	l, err := registry.NewLocalRing(ctx, reg, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		v := l.View()
		if o, ok := v.Owner(pinned); ok && o.Name == dedicated.Name && v.Len() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pinned guild owner never became %s", dedicated.Name)
		}
		select {
		case <-l.Changes(ctx):
		case <-time.After(100 * time.Millisecond):
		}
	}
	v := l.View()
	if got := v.Ring().Nodes(); len(got) != 1 || got[0] != shared.Name {
		t.Fatalf("ring members = %v, want only %s", got, shared.Name)
	}
	for id := snowflake.ID(1); id < 2000; id++ {
		if id == pinned {
			continue
		}
		if o, _ := v.Owner(id); o.Name != shared.Name {
			t.Fatalf("guild %d placed on %s, want %s", id, o.Name, shared.Name)
		}
	}
	if ns := v.Nodes(); len(ns) != 2 || ns[0].Name != shared.Name || ns[1].Name != dedicated.Name {
		t.Fatalf("View.Nodes = %v, want both live nodes sorted", ns)
	}
}
