package etcd_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/registry/registrytest"
)

func TestConformance(t *testing.T) {
	endpoint := startEtcd(t)
	registrytest.Run(t, func(t *testing.T) registry.Registry {
		r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
}

func TestNewValidates(t *testing.T) {
	if _, err := etcd.New(etcd.Config{}); err == nil {
		t.Fatal("New without endpoints succeeded")
	}
}

// startEtcd runs an embedded etcd for the test, or uses the server named
// by CONCORD_TEST_ETCD (started by the hack scripts).
func startEtcd(t *testing.T) string {
	t.Helper()
	if ep := os.Getenv("CONCORD_TEST_ETCD"); ep != "" {
		return ep
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, endpoint, err := etcd.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return endpoint
}

// TestSurvivesEtcdRestart stops the etcd server under a live watch and a
// registered node, and checks both recover once it is back.
func TestSurvivesEtcdRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop, endpoint, err := etcd.StartEmbedded(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	open := func() *etcd.Registry {
		r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	a, b := open(), open()
	ch, err := b.Watch(ctx, "role")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register(ctx, registry.Node{Name: "n1", Roles: []string{"role"}, Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	registrytest.Await(t, ch, "n1", func(s registry.Snapshot) bool { return len(s.Nodes) == 1 })

	stop()
	stop, _, err = etcd.StartEmbedded(ctx, dir, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := a.Register(ctx, registry.Node{Name: "n2", Roles: []string{"role"}, Addr: "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	s := registrytest.Await(t, ch, "n1 and n2 after the restart", func(s registry.Snapshot) bool { return len(s.Nodes) == 2 })
	if s.Nodes[0].Name != "n1" || s.Nodes[1].Name != "n2" {
		t.Fatalf("nodes after restart = %+v", s.Nodes)
	}
}
