package readstaterole

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// watchOnly is a Registry whose one role's snapshots the test sends.
type watchOnly struct {
	registry.Registry
	ch chan registry.Snapshot
}

// Watch forwards the test's snapshots until ctx ends, then closes, as a
// registry's watch does.
func (w watchOnly) Watch(ctx context.Context, _ string) (<-chan registry.Snapshot, error) {
	out := make(chan registry.Snapshot)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-w.ch:
				select {
				case out <- s:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// TestRingEpoch: a replica owns the users its ring view gives it, under the
// view's revision, so the owner after a ring change claims at a higher
// epoch than the owner before it; users of other replicas are refused.
func TestRingEpoch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := watchOnly{ch: make(chan registry.Snapshot, 1)}
	nodes := func(names ...string) []registry.Node {
		var out []registry.Node
		for _, n := range names {
			out = append(out, registry.Node{Name: n, Roles: []string{Name}, Addr: n + ":1"})
		}
		return out
	}
	reg.ch <- registry.Snapshot{Revision: 7, Nodes: nodes("a")}
	ring, err := registry.NewLocalRing(ctx, reg, Name, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	a, b := ringEpoch(ring, "a"), ringEpoch(ring, "b")
	user := snowflake.ID(12345)
	if e, ok := a(user); !ok || e != 7 {
		t.Fatalf("sole replica a: epoch %d, owns %v; want 7, true", e, ok)
	}
	if _, ok := b(user); ok {
		t.Fatal("replica b, not on the ring, owns a user")
	}
	// b joins at revision 9; find a user the ring now gives b.
	changes := ring.Changes(ctx)
	reg.ch <- registry.Snapshot{Revision: 9, Nodes: nodes("a", "b")}
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("the ring did not take revision 9")
	}
	for ring.View().Revision != 9 {
		select {
		case <-changes:
		case <-time.After(30 * time.Second):
			t.Fatalf("ring at revision %d, want 9", ring.View().Revision)
		}
	}
	moved := snowflake.ID(0)
	for u := snowflake.ID(1); u < 1000 && moved == 0; u++ {
		if n, _ := ring.Owner(u); n.Name == "b" {
			moved = u
		}
	}
	if moved == 0 {
		t.Fatal("no user of 1000 hashes to b")
	}
	if e, ok := b(moved); !ok || e != 9 {
		t.Fatalf("new owner b: epoch %d, owns %v; want 9 (above a's 7), true", e, ok)
	}
	if _, ok := a(moved); ok {
		t.Fatal("a still owns a user the ring gave b")
	}
}

// TestOwnerErr: the service's ErrNotOwner crosses ReadStateNode as the
// transport's ErrNotOwner, which callers retry on the ring's owner; other
// errors pass unchanged.
func TestOwnerErr(t *testing.T) {
	err := ownerErr(fmt.Errorf("ack: %w", readstate.ErrNotOwner))
	if !errors.Is(err, transport.ErrNotOwner) {
		t.Fatalf("ownerErr(ErrNotOwner) = %v, want transport.ErrNotOwner", err)
	}
	if err := ownerErr(readstate.ErrStore); !errors.Is(err, readstate.ErrStore) || errors.Is(err, transport.ErrNotOwner) {
		t.Fatalf("ownerErr(ErrStore) = %v, want it unchanged", err)
	}
	if ownerErr(nil) != nil {
		t.Fatal("ownerErr(nil) != nil")
	}
}
