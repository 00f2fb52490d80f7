package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// nextKV waits for the next KV update (a deadline, not a sleep).
func nextKV(t *testing.T, ch <-chan registry.KVUpdate, within time.Duration) registry.KVUpdate {
	t.Helper()
	select {
	case u, ok := <-ch:
		if !ok {
			t.Fatal("kv watch closed")
		}
		return u
	case <-time.After(within):
		t.Fatalf("no kv update within %s", within)
	}
	return registry.KVUpdate{}
}

// TestWatchKVAcrossEtcdRestart: a KV watch sends a snapshot, then each
// change; when etcd stops it sends Lost within a few seconds, and after
// the restart a snapshot with every key, then changes again.
func TestWatchKVAcrossEtcdRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop, endpoint, err := etcd.StartEmbedded(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, RequestTimeout: time.Second})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Put(ctx, "rev/a", []byte("1"), registry.Persistent); err != nil {
		t.Fatal(err)
	}
	ch, err := r.WatchKV(ctx, "rev/")
	if err != nil {
		t.Fatal(err)
	}
	if u := nextKV(t, ch, 5*time.Second); !u.Snapshot || len(u.Changes) != 1 || u.Changes[0].Key != "rev/a" {
		t.Fatalf("first update %+v, want a snapshot of rev/a", u)
	}
	if err := r.Put(ctx, "rev/b", []byte("2"), registry.Persistent); err != nil {
		t.Fatal(err)
	}
	if err := r.Put(ctx, "other/c", []byte("3"), registry.Persistent); err != nil {
		t.Fatal(err)
	}
	if u := nextKV(t, ch, 5*time.Second); u.Snapshot || len(u.Changes) != 1 || u.Changes[0].Key != "rev/b" || string(u.Changes[0].Value) != "2" {
		t.Fatalf("update %+v, want the change of rev/b only", u)
	}

	stop()
	if u := nextKV(t, ch, 10*time.Second); !u.Lost {
		t.Fatalf("after etcd stopped: %+v, want Lost", u)
	}
	stop, _, err = etcd.StartEmbedded(ctx, dir, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var u registry.KVUpdate
	for u = nextKV(t, ch, 30*time.Second); u.Lost; u = nextKV(t, ch, 30*time.Second) {
	}
	if !u.Snapshot || len(u.Changes) != 2 {
		t.Fatalf("after the restart: %+v, want a snapshot of rev/a and rev/b", u)
	}
	if err := r.Put(ctx, "rev/a", []byte("4"), registry.Persistent); err != nil {
		t.Fatal(err)
	}
	if u := nextKV(t, ch, 10*time.Second); len(u.Changes) != 1 || string(u.Changes[0].Value) != "4" {
		t.Fatalf("update after the restart %+v", u)
	}
}
