// Package registrytest is the conformance suite for registry.Registry
// implementations.
package registrytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Timeout bounds every wait of the suite, lease expiry included; the
// registries under test should use a lease TTL of a few seconds.
const Timeout = 20 * time.Second

var seq atomic.Int64

// unique returns a name no other test of this process uses.
func unique(t *testing.T, what string) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("%s-%s-%d-%d", what, name, time.Now().UnixNano()%1e6, seq.Add(1))
}

// Run runs the suite. newRegistry returns a new client of one shared
// backend on every call, as a separate process would hold; the suite
// closes what it gets. Tests use unique node names, roles and keys.
func Run(t *testing.T, newRegistry func(t *testing.T) registry.Registry) {
	open := func(t *testing.T) registry.Registry {
		r := newRegistry(t)
		t.Cleanup(func() { r.Close() })
		return r
	}
	t.Run("RegisterWatchLeave", func(t *testing.T) { testRegisterWatchLeave(t, open) })
	t.Run("DuplicateName", func(t *testing.T) { testDuplicate(t, open) })
	t.Run("InvalidNode", func(t *testing.T) { testInvalid(t, open) })
	t.Run("LeaseExpiry", func(t *testing.T) { testLeaseExpiry(t, open) })
	t.Run("Pins", func(t *testing.T) { testPins(t, open) })
	t.Run("Draining", func(t *testing.T) { testDraining(t, open) })
	t.Run("KV", func(t *testing.T) { testKV(t, open) })
	t.Run("WatchEndsWithContext", func(t *testing.T) { testWatchEnds(t, open) })
	if _, ok := open(t).(registry.Claimer); ok {
		t.Run("Claim", func(t *testing.T) { testClaim(t, open) })
	}
}

// Await reads snapshots from ch until ok accepts one, failing the test
// after Timeout or when ch closes.
func Await(t testing.TB, ch <-chan registry.Snapshot, what string, ok func(registry.Snapshot) bool) registry.Snapshot {
	t.Helper()
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	var last registry.Snapshot
	for {
		select {
		case s, open := <-ch:
			if !open {
				t.Fatalf("watch closed while waiting for %s; last snapshot %+v", what, last)
			}
			if ok(s) {
				return s
			}
			last = s
		case <-deadline.C:
			t.Fatalf("no snapshot with %s after %s; last %+v", what, Timeout, last)
		}
	}
}

func names(s registry.Snapshot) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Name)
	}
	return out
}

func find(s registry.Snapshot, name string) (registry.Node, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return registry.Node{}, false
}

func has(name string) func(registry.Snapshot) bool {
	return func(s registry.Snapshot) bool { _, ok := find(s, name); return ok }
}

func lacks(name string) func(registry.Snapshot) bool {
	return func(s registry.Snapshot) bool { _, ok := find(s, name); return !ok }
}

func watch(t *testing.T, r registry.Registry, role string) <-chan registry.Snapshot {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := r.Watch(ctx, role)
	if err != nil {
		t.Fatalf("Watch(%s): %v", role, err)
	}
	return ch
}

func register(t *testing.T, r registry.Registry, n registry.Node) registry.Registration {
	t.Helper()
	g, err := r.Register(context.Background(), n)
	if err != nil {
		t.Fatalf("Register(%s): %v", n.Name, err)
	}
	return g
}

func testRegisterWatchLeave(t *testing.T, open func(*testing.T) registry.Registry) {
	a, b := open(t), open(t)
	role, other := unique(t, "role"), unique(t, "other")
	ch := watch(t, b, role)
	first := Await(t, ch, "the initial snapshot", func(registry.Snapshot) bool { return true })
	if len(first.Nodes) != 0 {
		t.Fatalf("initial snapshot of a fresh role has nodes %v", names(first))
	}
	want := registry.Node{
		Name: unique(t, "n1"), Roles: []string{other, role}, Addr: "127.0.0.1:7001",
		HTTPAddr: "127.0.0.1:8001", Zone: "z1", Labels: map[string]string{"tier": "a"},
	}
	g1 := register(t, a, want)
	s := Await(t, ch, "n1", has(want.Name))
	got, _ := find(s, want.Name)
	if got.Addr != want.Addr || got.HTTPAddr != want.HTTPAddr || got.Zone != want.Zone ||
		!slices.Equal(got.Roles, want.Roles) || got.Labels["tier"] != "a" || got.Draining {
		t.Fatalf("watched node = %+v, want %+v", got, want)
	}
	if s.Revision <= first.Revision {
		t.Fatalf("revision did not advance: %d then %d", first.Revision, s.Revision)
	}
	// A node of another role only must not appear; a second node of the
	// role must, and the set is sorted by name.
	register(t, a, registry.Node{Name: unique(t, "x"), Roles: []string{other}, Addr: "127.0.0.1:7009"})
	n2 := unique(t, "n0")
	register(t, b, registry.Node{Name: n2, Roles: []string{role}, Addr: "127.0.0.1:7002"})
	s = Await(t, ch, "n1 and n2", func(s registry.Snapshot) bool { return len(s.Nodes) >= 2 })
	if got := names(s); !slices.Equal(got, []string{n2, want.Name}) {
		t.Fatalf("nodes = %v, want [%s %s]", got, n2, want.Name)
	}
	start := time.Now()
	if err := g1.Close(context.Background()); err != nil {
		t.Fatalf("Registration.Close: %v", err)
	}
	Await(t, ch, "n1 gone", lacks(want.Name))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("graceful leave took %s; it should not wait for the lease", d)
	}
}

func testDuplicate(t *testing.T, open func(*testing.T) registry.Registry) {
	a, b := open(t), open(t)
	n := registry.Node{Name: unique(t, "n"), Roles: []string{"r"}, Addr: "127.0.0.1:1"}
	g := register(t, a, n)
	if _, err := b.Register(context.Background(), n); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("second Register = %v, want ErrExists", err)
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	g2 := register(t, b, n)
	g2.Close(context.Background())
}

func testInvalid(t *testing.T, open func(*testing.T) registry.Registry) {
	a := open(t)
	for _, name := range []string{"", "a/b"} {
		if _, err := a.Register(context.Background(), registry.Node{Name: name}); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("Register(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

func testLeaseExpiry(t *testing.T, open func(*testing.T) registry.Registry) {
	a, b := open(t), open(t)
	role := unique(t, "role")
	ch := watch(t, b, role)
	n := unique(t, "dies")
	keep := unique(t, "stays")
	register(t, a, registry.Node{Name: n, Roles: []string{role}, Addr: "127.0.0.1:1"})
	register(t, b, registry.Node{Name: keep, Roles: []string{role}, Addr: "127.0.0.1:2"})
	Await(t, ch, "both nodes", func(s registry.Snapshot) bool { return has(n)(s) && has(keep)(s) })
	if err := a.Put(context.Background(), unique(t, "load"), []byte("7"), registry.WhileAlive); err != nil {
		t.Fatal(err)
	}
	// Closing without deregistering is a process death: the entry must
	// outlive the connection for a while and then expire with the lease.
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s := Await(t, ch, "the dead node expired", lacks(n))
	if !has(keep)(s) {
		t.Fatalf("the live node vanished with the dead one: %v", names(s))
	}
}

func testPins(t *testing.T, open func(*testing.T) registry.Registry) {
	a := open(t)
	ctx := context.Background()
	role := unique(t, "role")
	ch := watch(t, a, role)
	guild := snowflake.ID(1<<40 + seq.Add(1))
	if err := a.Pin(ctx, guild, "g-node-1"); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "the pin", func(s registry.Snapshot) bool { return s.Pins[guild] == "g-node-1" })
	if err := a.Pin(ctx, guild, "g-node-2"); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "the moved pin", func(s registry.Snapshot) bool { return s.Pins[guild] == "g-node-2" })
	if err := a.Unpin(ctx, guild); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "no pin", func(s registry.Snapshot) bool { _, ok := s.Pins[guild]; return !ok })
	if err := a.Unpin(ctx, guild); err != nil {
		t.Fatalf("Unpin of a missing pin = %v", err)
	}
	if err := a.Pin(ctx, guild, ""); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("Pin to empty node = %v, want ErrInvalid", err)
	}
}

func testDraining(t *testing.T, open func(*testing.T) registry.Registry) {
	a, b := open(t), open(t)
	ctx := context.Background()
	role := unique(t, "role")
	ch := watch(t, b, role)
	n := registry.Node{Name: unique(t, "n"), Roles: []string{role}, Addr: "127.0.0.1:1"}
	g := register(t, a, n)
	Await(t, ch, "the node", has(n.Name))
	draining := func(want bool) func(registry.Snapshot) bool {
		return func(s registry.Snapshot) bool { x, ok := find(s, n.Name); return ok && x.Draining == want }
	}
	if err := b.SetDraining(ctx, n.Name, true); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "draining", draining(true))
	if err := b.SetDraining(ctx, n.Name, false); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "not draining", draining(false))
	if err := b.SetDraining(ctx, unique(t, "ghost"), true); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("SetDraining of an unknown node = %v, want ErrNotFound", err)
	}
	// The flag goes with the entry: a re-registered node starts serving.
	if err := b.SetDraining(ctx, n.Name, true); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "draining again", draining(true))
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	Await(t, ch, "node gone", lacks(n.Name))
	register(t, a, n)
	s := Await(t, ch, "node back", has(n.Name))
	if x, _ := find(s, n.Name); x.Draining {
		t.Fatal("a re-registered node inherited the old draining flag")
	}
}

func testKV(t *testing.T, open func(*testing.T) registry.Registry) {
	a, b := open(t), open(t)
	ctx := context.Background()
	dir := unique(t, "kv") + "/"
	if _, err := a.Get(ctx, dir+"missing"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Get of a missing key = %v, want ErrNotFound", err)
	}
	if err := a.Put(ctx, dir+"x", []byte("1"), registry.Persistent); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, dir+"y", []byte("2"), registry.WhileAlive); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, dir+"x"); err != nil || string(v) != "1" {
		t.Fatalf("Get(x) = %q, %v", v, err)
	}
	got, err := b.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[dir+"x"]) != "1" || string(got[dir+"y"]) != "2" {
		t.Fatalf("List = %v", got)
	}
	if err := b.Delete(ctx, dir+"x"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, dir+"x"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := b.Delete(ctx, dir+"x"); err != nil {
		t.Fatalf("Delete of a missing key = %v", err)
	}
	// The ephemeral key dies with its writer's lease. The KV has no
	// watch, so poll with a deadline.
	a.Close()
	deadline := time.Now().Add(Timeout)
	for {
		_, err := b.Get(ctx, dir+"y")
		if errors.Is(err, registry.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("WhileAlive key survived its writer by %s", Timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testClaim(t *testing.T, open func(*testing.T) registry.Registry) {
	a, b := open(t), open(t)
	ca, cb := a.(registry.Claimer), b.(registry.Claimer)
	ctx := context.Background()
	key := unique(t, "claim") + "/0-0"
	lost, err := ca.Claim(ctx, key, []byte("a"))
	if err != nil {
		t.Fatalf("first Claim: %v", err)
	}
	if _, err := cb.Claim(ctx, key, []byte("b")); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("Claim of a held key = %v, want ErrExists", err)
	}
	if _, err := ca.Claim(ctx, key, []byte("a")); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("second Claim by the holder = %v, want ErrExists", err)
	}
	if v, err := b.Get(ctx, key); err != nil || string(v) != "a" {
		t.Fatalf("Get of a claimed key = %q, %v", v, err)
	}
	// Delete releases at once.
	if err := a.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Claim(ctx, key, []byte("b")); err != nil {
		t.Fatalf("Claim after the holder deleted it: %v", err)
	}
	select {
	case <-lost:
		t.Fatal("a released claim reported lost")
	default:
	}
	// A claim dies with its holder's lease; then another may take it.
	b.Close()
	deadline := time.Now().Add(Timeout)
	for {
		_, err := ca.Claim(ctx, key, []byte("a"))
		if err == nil {
			break
		}
		if !errors.Is(err, registry.ErrExists) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim survived its holder by %s", Timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testWatchEnds(t *testing.T, open func(*testing.T) registry.Registry) {
	a := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := a.Watch(ctx, unique(t, "role"))
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	cancel()
	deadline := time.After(Timeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Watch channel still open after its context ended")
		}
	}
}
