package registry

import (
	"fmt"
	"math"
	"testing"
)

func ringOf(n int) *Ring {
	var nodes []string
	for i := range n {
		nodes = append(nodes, fmt.Sprintf("guild-%d", i))
	}
	return NewRing(nodes, nil, 0)
}

func TestRingEmpty(t *testing.T) {
	if _, ok := NewRing(nil, nil, 0).Owner(42); ok {
		t.Fatal("empty ring has an owner")
	}
	var r *Ring
	if _, ok := r.Owner(42); ok {
		t.Fatal("nil ring has an owner")
	}
}

func TestRingBalanced(t *testing.T) {
	r := ringOf(4)
	const keys = 100000
	count := map[string]int{}
	for k := range uint64(keys) {
		n, ok := r.Owner(k<<22 | 7)
		if !ok {
			t.Fatal("no owner")
		}
		count[n]++
	}
	if len(count) != 4 {
		t.Fatalf("owners = %v", count)
	}
	for n, c := range count {
		if share := float64(c) / keys; math.Abs(share-0.25) > 0.07 {
			t.Errorf("%s owns %.3f of the keys, want about 0.25", n, share)
		}
	}
}

func TestRingMinimalMovement(t *testing.T) {
	before := ringOf(4)
	after := NewRing(append(before.Nodes(), "guild-new"), nil, 0)
	const keys = 100000
	moved := 0
	for k := range uint64(keys) {
		key := k*2654435761 + 1
		o, _ := before.Owner(key)
		n, _ := after.Owner(key)
		if o == n {
			continue
		}
		moved++
		if n != "guild-new" {
			t.Fatalf("key %d moved from %s to %s, not to the new node", key, o, n)
		}
	}
	if share := float64(moved) / keys; share < 0.13 || share > 0.27 {
		t.Fatalf("adding a 5th node moved %.3f of the keys, want about 1/5", share)
	}
	// Removing it again puts every key back where it was.
	removed := NewRing(before.Nodes(), nil, 0)
	for k := range uint64(keys) {
		key := k*2654435761 + 1
		o, _ := before.Owner(key)
		n, _ := removed.Owner(key)
		if o != n {
			t.Fatalf("key %d: ring without the new node disagrees (%s vs %s)", key, o, n)
		}
	}
}

func TestRingPinsFirst(t *testing.T) {
	r := NewRing([]string{"a", "b"}, map[uint64]string{7: "pinned"}, 0)
	if n, ok := r.Owner(7); !ok || n != "pinned" {
		t.Fatalf("Owner(7) = %q, %v; want the pin", n, ok)
	}
	if n, _ := r.Owner(8); n != "a" && n != "b" {
		t.Fatalf("Owner(8) = %q", n)
	}
	if n, ok := NewRing(nil, map[uint64]string{7: "p"}, 0).Owner(7); !ok || n != "p" {
		t.Fatalf("pin on an empty ring = %q, %v", n, ok)
	}
}

func TestRingDeterministic(t *testing.T) {
	a := NewRing([]string{"x", "y", "z"}, nil, 0)
	b := NewRing([]string{"z", "x", "y", "x"}, nil, 0)
	for k := range uint64(10000) {
		o1, _ := a.Owner(k)
		o2, _ := b.Owner(k)
		if o1 != o2 {
			t.Fatalf("key %d: %s vs %s for the same members", k, o1, o2)
		}
	}
}

func BenchmarkRingOwner(b *testing.B) {
	r := ringOf(16)
	b.ReportAllocs()
	var k uint64
	for b.Loop() {
		k += 0x9E3779B97F4A7C15
		r.Owner(k)
	}
}

func BenchmarkNewRing(b *testing.B) {
	var nodes []string
	for i := range 16 {
		nodes = append(nodes, fmt.Sprintf("guild-%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		NewRing(nodes, nil, 0)
	}
}
