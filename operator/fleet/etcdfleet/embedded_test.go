package etcdfleet

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// embeddedEtcd starts a real (embedded) etcd for one test and returns a
// context bounding the test and the etcd endpoint; both end with it.
func embeddedEtcd(t *testing.T) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	stop, endpoint, err := etcd.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(stop)
	return ctx, endpoint
}

// etcdClient connects a registry client to endpoint under the tests' prefix,
// as a runtime node or the operator does; it is closed when the test
// ends (closing it twice is harmless).
func etcdClient(t *testing.T, endpoint string) *etcd.Registry {
	t.Helper()
	r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, Prefix: "/t/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
