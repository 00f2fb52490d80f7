package registry

import (
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// DefaultVirtualNodes is the number of points each node gets on a Ring.
const DefaultVirtualNodes = 128

// Ring is an immutable consistent-hash ring: each member node owns the
// keys hashing between its points and the previous point. Adding or
// removing one of n nodes moves about 1/n of the keys, all of them to or
// from that node. Pins are consulted first.
//
// A Ring is safe for concurrent use; changes build a new Ring.
type Ring struct {
	hashes []uint64 // sorted point hashes
	owners []int32  // owners[i] is the index in nodes of hashes[i]'s node
	nodes  []string // sorted member names
	pins   map[uint64]string
}

// NewRing builds a ring over nodes with vnodes points each (vnodes ≤ 0
// means DefaultVirtualNodes). pins map keys to the node that owns them
// regardless of the ring; they are applied as given, so the caller drops
// pins to nodes that are not live. Neither argument is retained.
func NewRing(nodes []string, pins map[uint64]string, vnodes int) *Ring {
	if vnodes <= 0 {
		vnodes = DefaultVirtualNodes
	}
	names := slices.Clone(nodes)
	slices.Sort(names)
	names = slices.Compact(names)
	type point struct {
		hash uint64
		node int32
	}
	points := make([]point, 0, len(names)*vnodes)
	buf := make([]byte, 0, 64)
	for i, name := range names {
		for v := range vnodes {
			buf = append(buf[:0], name...)
			buf = append(buf, '#')
			buf = strconv.AppendInt(buf, int64(v), 10)
			points = append(points, point{xxhash.Sum64(buf), int32(i)})
		}
	}
	// Ties (vanishingly rare) go to the smaller name, on every process.
	slices.SortFunc(points, func(a, b point) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		return int(a.node - b.node)
	})
	r := &Ring{
		hashes: make([]uint64, len(points)),
		owners: make([]int32, len(points)),
		nodes:  names,
	}
	for i, p := range points {
		r.hashes[i] = p.hash
		r.owners[i] = p.node
	}
	if len(pins) > 0 {
		r.pins = make(map[uint64]string, len(pins))
		for k, v := range pins {
			r.pins[k] = v
		}
	}
	return r
}

// HashKey is the ring position of key: xxhash of its 8 little-endian bytes.
func HashKey(key uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], key)
	return xxhash.Sum64(b[:])
}

// Owner returns the node owning key: its pin if it has one, otherwise the
// node of the first point at or after the key's hash. ok is false on an
// empty ring without a pin for key.
func (r *Ring) Owner(key uint64) (node string, ok bool) {
	if r == nil {
		return "", false
	}
	if n, ok := r.pins[key]; ok {
		return n, true
	}
	if len(r.hashes) == 0 {
		return "", false
	}
	h := HashKey(key)
	i, _ := slices.BinarySearch(r.hashes, h)
	if i == len(r.hashes) {
		i = 0
	}
	return r.nodes[r.owners[i]], true
}

// Nodes returns the ring's member names, sorted. The caller must not
// modify the slice.
func (r *Ring) Nodes() []string {
	if r == nil {
		return nil
	}
	return r.nodes
}

// Len returns the number of member nodes.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.nodes)
}
