// Package etcdtest starts an embedded etcd for a test and opens registries
// on it, so that tests of the roles that find each other through the
// registry run against a real etcd without each writing the setup again.
package etcdtest

import (
	"context"
	"testing"
	"time"

	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// Start runs an embedded etcd in a temporary directory until the test ends
// and returns its client endpoint.
func Start(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, ep, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(stop)
	return ep
}

// Open returns a registry on endpoint with cfg (its Endpoints replaced),
// closed when the test ends.
func Open(t testing.TB, endpoint string, cfg etcdreg.Config) *etcdreg.Registry {
	t.Helper()
	cfg.Endpoints = []string{endpoint}
	reg, err := etcdreg.New(cfg)
	if err != nil {
		t.Fatalf("open registry on %s: %v", endpoint, err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// Registry starts an embedded etcd and returns a registry on it with the
// default configuration.
func Registry(t testing.TB) *etcdreg.Registry {
	t.Helper()
	return Open(t, Start(t), etcdreg.Config{})
}
