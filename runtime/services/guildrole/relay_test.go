package guildrole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// fakeRelayClient records Relay calls; addresses in down fail.
type fakeRelayClient struct {
	calls map[string][]map[string][]event.Target
	down  map[string]bool
}

func (f *fakeRelayClient) Relay(_ context.Context, addr, _ string, _ []json.RawMessage, byNode map[string][]event.Target) error {
	if f.down[addr] {
		return errors.New("relay down")
	}
	f.calls[addr] = append(f.calls[addr], byNode)
	return nil
}

func (f *fakeRelayClient) Close() error { return nil }

func TestRelayRouter(t *testing.T) {
	fc := &fakeRelayClient{calls: map[string][]map[string][]event.Target{}, down: map[string]bool{}}
	r, err := newRelayRouter(fc, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	byNode := map[string][]event.Target{}
	for i := range 40 {
		byNode[fmt.Sprintf("gw-%d", i)] = []event.Target{{Session: event.SessionID(fmt.Sprint(i))}}
	}
	if relayed, _ := r.Relay(ctx, 42, "X", nil, byNode); relayed {
		t.Fatal("a guild without relays was relayed")
	}
	r.apply(registry.KVUpdate{Snapshot: true, Changes: []registry.KVChange{
		{Key: "relays/42", Value: []byte(`["10.0.0.2:9090","10.0.0.1:9090","10.0.0.3:9090"]`)},
		{Key: "relays/7", Value: []byte(`not json`)},
	}})
	relayed, failed := r.Relay(ctx, 42, "X", nil, byNode)
	if !relayed || len(failed) != 0 {
		t.Fatalf("relayed=%v failed=%v", relayed, failed)
	}
	// One request per relay; every node exactly once; each relay gets a share.
	seen := map[string]string{}
	for addr, calls := range fc.calls {
		if len(calls) != 1 {
			t.Fatalf("%s got %d requests for one dispatch", addr, len(calls))
		}
		for node := range calls[0] {
			if prev, dup := seen[node]; dup {
				t.Fatalf("%s sent through %s and %s", node, prev, addr)
			}
			seen[node] = addr
		}
	}
	if len(seen) != 40 || len(fc.calls) != 3 {
		t.Fatalf("%d nodes over %d relays, want 40 over 3", len(seen), len(fc.calls))
	}
	// A relay leaving moves only its own nodes.
	r.apply(registry.KVUpdate{Changes: []registry.KVChange{{Key: "relays/42", Value: []byte(`["10.0.0.1:9090","10.0.0.2:9090"]`)}}})
	for node, addr := range seen {
		if got := pickRelay(r.relays[42], node); addr != "10.0.0.3:9090" && got != addr {
			t.Fatalf("%s moved from %s to %s though its relay stayed", node, addr, got)
		}
	}
	// A failed relay hands its nodes back for direct delivery.
	fc.down["10.0.0.1:9090"] = true
	_, failed = r.Relay(ctx, 42, "X", nil, byNode)
	for _, node := range failed {
		if pickRelay(r.relays[42], node) != "10.0.0.1:9090" {
			t.Fatalf("%s reported failed but its relay is up", node)
		}
	}
	if len(failed) == 0 {
		t.Fatal("no node reported failed with a relay down")
	}
	// Deleted, Lost and Snapshot updates.
	r.apply(registry.KVUpdate{Lost: true})
	if len(r.relays[42]) != 2 {
		t.Fatal("a lost watch dropped the relay lists")
	}
	r.apply(registry.KVUpdate{Changes: []registry.KVChange{{Key: "relays/42", Deleted: true}}})
	if relayed, _ := r.Relay(ctx, 42, "X", nil, byNode); relayed {
		t.Fatal("relayed after the list was deleted")
	}
}
