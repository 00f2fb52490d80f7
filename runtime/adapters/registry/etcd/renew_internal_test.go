package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// embeddedRegistry is a Registry on a real (embedded) etcd for one test,
// with a context bounding the test; both end with it.
func embeddedRegistry(t *testing.T) (context.Context, *Registry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	stop, endpoint, err := StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	r, err := New(Config{Endpoints: []string{endpoint}, LeaseTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return ctx, r
}

// A renewal while the old lease is still alive (the keep-alive stream
// ended because its member died, not because the lease expired) keeps the
// process's claims: they move to the new lease instead of being reported
// lost, which would stop a node whose registry merely failed over.
func TestRenewKeepsClaimsOfALiveLease(t *testing.T) {
	ctx, r := embeddedRegistry(t)
	lost, err := r.Claim(ctx, "renew/"+t.Name(), []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	old := r.lease
	if _, _, err := r.renew(); err != nil {
		t.Fatal(err)
	}
	// Revoking the old lease ends the keep-alive goroutine's stream too, so
	// it renews once more: await the settled state, the claim on the lease
	// the registry now holds.
	full := r.kvKey("renew/" + t.Name())
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-lost:
			t.Fatal("the claim was reported lost although this process's live lease held it")
		default:
		}
		r.mu.Lock()
		current := r.lease
		r.mu.Unlock()
		get, err := r.cli.Get(ctx, full)
		if err != nil || len(get.Kvs) != 1 || string(get.Kvs[0].Value) != "mine" {
			t.Fatalf("claimed key after renewal: %v %v", get, err)
		}
		if got := get.Kvs[0].Lease; got == int64(current) && got != int64(old) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claimed key on lease %d, want the registry's lease %d (old %d)", get.Kvs[0].Lease, current, old)
		}
		time.Sleep(50 * time.Millisecond) // polling the store's state, not waiting for time
	}
	ttl, err := r.cli.TimeToLive(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL > 0 {
		t.Fatalf("the old lease still runs (TTL %d s) after renewal", ttl.TTL)
	}
}

// A renewal attempt whose claim transaction etcd applied but whose
// client timed out (a starved machine: the flood benchmark at 100,000
// viewers saw it) leaves the claim on a lease that attempt granted and
// could not revoke. The next renewal must know that lease for this
// process's and keep the claim; taking it for another process's stopped
// a live gateway ("snowflake pair lost to another node") though no other
// process held the pair.
func TestRenewKeepsClaimsOfAnEarlierAttemptsLease(t *testing.T) {
	ctx, r := embeddedRegistry(t)
	key := "renew/" + t.Name()
	lost, err := r.Claim(ctx, key, []byte("mine"))
	if err != nil {
		t.Fatal(err)
	}
	full := r.kvKey(key)

	// The failed attempt, as renew runs it: a lease granted (and known as
	// granted), the claim written on it, then the attempt's requests time
	// out and the lease is neither revoked nor adopted. The registry's
	// own lease expires meanwhile (revoked here).
	r.mu.Lock()
	g, err := r.cli.Grant(ctx, 30)
	if err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	r.granted[g.ID] = true
	current := r.lease
	r.mu.Unlock()
	if _, err := r.cli.Revoke(ctx, current); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.Put(ctx, full, "mine", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}

	next, _, err := r.renew()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
		t.Fatal("the claim was reported lost although a lease this process granted held it")
	default:
	}
	get, err := r.cli.Get(ctx, full)
	if err != nil || len(get.Kvs) != 1 {
		t.Fatalf("claimed key after renewal: %v %v", get, err)
	}
	if got := clientv3.LeaseID(get.Kvs[0].Lease); got != next {
		t.Fatalf("claim on lease %d after renewal, want the new lease %d", got, next)
	}
	ttl, err := r.cli.TimeToLive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ttl.TTL > 0 {
		t.Fatalf("the failed attempt's lease still runs (TTL %d s) after renewal", ttl.TTL)
	}
}
