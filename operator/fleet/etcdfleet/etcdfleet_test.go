package etcdfleet

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestAgainstEtcd drives the adapter against a real (embedded) etcd, with
// guild nodes registered as the runtime registers them.
func TestAgainstEtcd(t *testing.T) {
	ctx, endpoint := embeddedEtcd(t)

	// Two guild nodes, as `concord serve --roles=guild` registers them.
	nodes := etcdClient(t, endpoint)
	for _, n := range []string{"prod-guild-0", "prod-guild-99"} {
		if _, err := nodes.Register(ctx, registry.Node{Name: n, Roles: []string{registry.RoleGuild}, Addr: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}

	p := &Provider{}
	defer p.Close()
	r, err := p.Registry(ctx, fleet.ClusterKey{Namespace: "ns", Name: "prod", Endpoints: []string{endpoint}, Prefix: "/t/"})
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := p.Registry(ctx, fleet.ClusterKey{Namespace: "ns", Name: "prod", Endpoints: []string{endpoint}, Prefix: "/t/"})
	if r2 != r {
		t.Fatal("provider opened a second client for the same cluster")
	}

	const guild = "80351110224678912"
	before, err := r.GuildOwner(ctx, guild)
	if err != nil {
		t.Fatal(err)
	}
	target := "prod-guild-0"
	if before == target {
		target = "prod-guild-99"
	}
	if err := r.PinGuild(ctx, guild, target); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.GuildOwner(ctx, guild); got != target {
		t.Fatalf("owner after pin = %q, want %q", got, target)
	}
	// The pin is the runtime's key, visible to its watchers.
	ch, _ := nodes.Watch(ctx, registry.RoleGuild)
	snap := <-ch
	if snap.Pins[snowflake.ID(80351110224678912)] != target {
		t.Fatalf("runtime sees pins %v", snap.Pins)
	}
	if err := r.UnpinGuild(ctx, guild); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.GuildOwner(ctx, guild); got != before {
		t.Fatalf("owner after unpin = %q, want the ring's %q", got, before)
	}

	// Draining a live node, and a node that is gone (ignored).
	if err := r.MarkDraining(ctx, "guild", "prod-guild-0"); err != nil {
		t.Fatal(err)
	}
	snap = <-func() <-chan registry.Snapshot { c, _ := nodes.Watch(ctx, registry.RoleGuild); return c }()
	for _, n := range snap.Nodes {
		if n.Name == "prod-guild-0" && !n.Draining {
			t.Fatal("prod-guild-0 not draining in the runtime's view")
		}
	}
	if err := r.MarkDraining(ctx, "gateway", "gone-pod"); err != nil {
		t.Fatalf("draining a node that is not live: %v", err)
	}
	if err := r.ClearDraining(ctx, "guild", "prod-guild-0"); err != nil {
		t.Fatal(err)
	}

	// Relays.
	if err := r.SetRelays(ctx, guild, []string{"10.0.0.1:7070", "10.0.0.2:7070"}); err != nil {
		t.Fatal(err)
	}
	b, err := nodes.Get(ctx, RelaysKey(guild))
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	if err := json.Unmarshal(b, &eps); err != nil || len(eps) != 2 {
		t.Fatalf("relays = %s (%v)", b, err)
	}
	if err := r.SetRelays(ctx, guild, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Get(ctx, RelaysKey(guild)); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("relays after withdrawal: %v", err)
	}
	if _, err := r.GuildOwner(ctx, "not-a-snowflake"); err == nil {
		t.Fatal("want an error for a malformed guild id")
	}
}
