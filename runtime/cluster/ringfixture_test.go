package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/registry/etcd/etcdtest"
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
	reg := etcdtest.Registry(t)
	ring, err := registry.NewLocalRing(ctx, reg, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ring.Close)
	return &ringFixture{t: t, reg: reg, ring: ring}
}
