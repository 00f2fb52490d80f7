package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/registry"
	etcdreg "github.com/concord-chat/concord/runtime/registry/etcd"
)

// ringFixture is a registry (embedded etcd) and a LocalRing over its
// guild nodes.
type ringFixture struct {
	t    *testing.T
	reg  registry.Registry
	ring *registry.LocalRing
}

func newRingFixture(t *testing.T) *ringFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, ep, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ep}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ring, err := registry.NewLocalRing(ctx, reg, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ring.Close)
	return &ringFixture{t: t, reg: reg, ring: ring}
}
