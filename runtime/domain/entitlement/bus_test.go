package entitlement

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
)

// recv waits for the next notice (a deadline, not a sleep).
func recv(t *testing.T, ch <-chan Notice) Notice {
	t.Helper()
	select {
	case n, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notice within 10 s")
	}
	return Notice{}
}

// testBus checks the Bus contract: a Snapshot first, pushes in order,
// the latest revocation per bot in a later watcher's Snapshot.
func testBus(t *testing.T, b Bus) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := b.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, w); !n.Snapshot || len(n.Revocations) != 0 {
		t.Fatalf("first notice %+v, want an empty snapshot", n)
	}
	r1 := Revocation{ID: "a", Kind: KindUninstall, BotUserID: bot, ApplicationID: app, GuildID: guildA, At: 1}
	r2 := Revocation{ID: "b", Kind: KindTokenReset, BotUserID: bot, ApplicationID: app, TokenGeneration: 4, At: 2}
	for _, r := range []Revocation{r1, r2} {
		if err := b.Publish(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var got []Revocation
	for len(got) < 2 {
		n := recv(t, w)
		if n.Snapshot || n.Lost {
			t.Fatalf("unexpected %+v", n)
		}
		got = append(got, n.Revocations...)
	}
	if got[0] != r1 || got[1] != r2 {
		t.Fatalf("pushes %+v, want %+v then %+v", got, r1, r2)
	}
	w2, err := b.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, w2); !n.Snapshot || len(n.Revocations) != 1 || n.Revocations[0] != r2 {
		t.Fatalf("later watcher's snapshot %+v, want the latest revocation %+v", n, r2)
	}
}

func TestMemBus(t *testing.T) { testBus(t, NewMemBus()) }

func TestRegistryBusOverEmbeddedEtcd(t *testing.T) {
	stop, ep, err := etcd.StartEmbedded(context.Background(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := etcd.New(etcd.Config{Endpoints: []string{ep}})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close(); stop() })
	b, err := NewRegistryBus(reg, "")
	if err != nil {
		t.Fatal(err)
	}
	testBus(t, b)
}

func TestFaultyBus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := NewFaultyBus(NewMemBus())
	w, err := f.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := recv(t, w); !n.Snapshot {
		t.Fatalf("first notice %+v", n)
	}
	f.SetDropPublish(true)
	if err := f.Publish(ctx, Revocation{ID: "dropped", BotUserID: bot}); err != nil {
		t.Fatal(err)
	}
	f.SetDropPublish(false)
	f.SetDown(true)
	if n := recv(t, w); !n.Lost {
		t.Fatalf("after SetDown: %+v, want Lost", n)
	}
	if err := f.Publish(ctx, Revocation{ID: "refused", BotUserID: bot}); err == nil {
		t.Fatal("publish while down succeeded")
	}
	f.SetDown(false)
	if n := recv(t, w); !n.Snapshot || len(n.Revocations) != 0 {
		t.Fatalf("after restore: %+v, want an empty snapshot (the dropped push never arrived)", n)
	}
}
