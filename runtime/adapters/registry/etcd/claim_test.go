package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// A claim whose lease expired while another process took the key is
// reported lost at renewal, not silently re-taken.
func TestClaimLostAfterLeaseExpiry(t *testing.T) {
	endpoint := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	key := "claim-lost/" + t.Name()
	lost, err := r.Claim(ctx, key, []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	full := "/concord/kv/" + key
	get, err := raw.Get(ctx, full)
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("claimed key: %v %v", get, err)
	}
	mine := clientv3.LeaseID(get.Kvs[0].Lease)
	// Another process takes the key on its own lease, then the claimer's
	// lease ends (as after a partition longer than the TTL).
	other, err := raw.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, full, "theirs", clientv3.WithLease(other.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Revoke(ctx, mine); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("the claim was not reported lost after its lease ended and another took the key")
	}
	if v, err := r.Get(ctx, key); err != nil || string(v) != "theirs" {
		t.Fatalf("key after the loss = %q, %v; the renewal must not overwrite the new holder", v, err)
	}
}
