package placement

import (
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"sync"
)

// Replicas is how many points each gateway has on the ring: enough that
// the arcs, and so the streams each gateway is first for, are within a
// few percent of even.
const Replicas = 128

// Factor bounds a gateway's load: a placement never takes a gateway to
// more than Factor times the fleet's average viewers per gateway.
const Factor = 1.25

// Floor is the load below which the bound does not apply: on a nearly
// idle fleet 1.25 times the average is a handful of viewers, and
// spreading a stream's first viewers over every gateway to honour it
// would cost a backbone copy per gateway for nothing.
const Floor = 1000

type point struct {
	h    uint64
	node int
}

// Ring is a consistent-hash ring of gateway names.
type Ring struct {
	nodes  []string
	points []point
}

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	// fnv's low bits mix poorly for keys that differ at the end; a final
	// avalanche spreads them over the ring.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// NewRing places each node at Replicas points.
func NewRing(nodes []string) *Ring {
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	r := &Ring{nodes: nodes, points: make([]point, 0, len(nodes)*Replicas)}
	for i, n := range nodes {
		for j := range Replicas {
			r.points = append(r.points, point{h: hash(n + "#" + strconv.Itoa(j)), node: i})
		}
	}
	sort.Slice(r.points, func(a, b int) bool { return r.points[a].h < r.points[b].h })
	return r
}

// Nodes returns the ring's gateways, sorted.
func (r *Ring) Nodes() []string { return r.nodes }

// Walk calls f with each gateway once, clockwise from key's point, until f
// returns false. The first k gateways of a key are a prefix of its first
// k+1, so widening a stream only adds gateways.
func (r *Ring) Walk(key string, f func(node string) bool) {
	if len(r.points) == 0 {
		return
	}
	h := hash(key)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].h >= h })
	seen := make([]bool, len(r.nodes))
	left := len(r.nodes)
	for n := 0; n < len(r.points) && left > 0; n++ {
		p := r.points[(i+n)%len(r.points)]
		if seen[p.node] {
			continue
		}
		seen[p.node] = true
		left--
		if !f(r.nodes[p.node]) {
			return
		}
	}
}

// Placer chooses a stream's gateway: consistent hashing of the stream id
// with bounded load over the stream's k gateways (its Directory width),
// the least loaded of them first. Loads are the directory's reports plus
// the connections this placer sent since the reports it uses were read,
// so a burst of joins between two reports spreads as it would after them.
type Placer struct {
	dir *Directory
	cfg PlacerConfig

	mu    sync.Mutex
	ring  *Ring
	down  map[string]bool  // skipped: unreachable (Edge.markDown)
	sent  map[string]int64 // connections placed since the directory read at `since`
	since int64
}

// PlacerConfig tunes a Placer; zero fields take Factor and Floor.
type PlacerConfig struct {
	Factor float64
	Floor  int64
}

// NewPlacer returns a placer on dir with no gateways yet.
func NewPlacer(dir *Directory, cfg PlacerConfig) *Placer {
	if cfg.Factor <= 1 {
		cfg.Factor = Factor
	}
	if cfg.Floor <= 0 {
		cfg.Floor = Floor
	}
	return &Placer{dir: dir, cfg: cfg, ring: NewRing(nil), sent: map[string]int64{}}
}

// SetGateways replaces the gateways. Connections already placed stay
// where they are (placement concerns new connections only).
func (p *Placer) SetGateways(names []string) {
	r := NewRing(names)
	p.mu.Lock()
	p.ring = r
	p.mu.Unlock()
}

// SetDown replaces the gateways to skip (unreachable; nil: none).
func (p *Placer) SetDown(names []string) {
	down := make(map[string]bool, len(names))
	for _, n := range names {
		down[n] = true
	}
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// Choice is a placement and how it was made.
type Choice struct {
	Gateway string
	// Width is the stream's k.
	Width int
	// Spilled is true when a gateway among the stream's first k on the
	// ring was skipped for being at the load bound.
	Spilled bool
}

// Pick returns the gateway for one new connection to stream (false: no
// gateway).
func (p *Placer) Pick(stream string) (Choice, bool) {
	k := p.dir.Width(stream)
	loads := p.dir.Loads()
	_, at := p.dir.Fresh()
	p.mu.Lock()
	defer p.mu.Unlock()
	if at.UnixNano() != p.since {
		p.since, p.sent = at.UnixNano(), map[string]int64{}
	}
	nodes := p.ring.Nodes()
	if len(nodes) == 0 {
		return Choice{}, false
	}
	k = min(k, len(nodes))
	load := func(n string) int64 { return loads[n] + p.sent[n] }
	var total int64
	for _, n := range nodes {
		total += load(n)
	}
	// The bound counts the connection being placed (total+1), so an
	// empty fleet admits it anywhere.
	bound := max(p.cfg.Factor*float64(total+1)/float64(len(nodes)), float64(p.cfg.Floor))
	var set, over []string
	p.ring.Walk(stream, func(n string) bool {
		if p.down[n] {
			return true
		}
		if float64(load(n)+1) <= bound {
			set = append(set, n)
		} else if len(set)+len(over) < k {
			over = append(over, n)
		}
		return len(set) < k
	})
	c := Choice{Width: k, Spilled: len(over) > 0}
	if len(set) == 0 && len(over) == 0 {
		return Choice{}, false // every gateway unreachable
	}
	if len(set) == 0 {
		set = over // every gateway at the bound: keep affinity
	}
	best := set[0]
	for _, n := range set[1:] {
		if load(n) < load(best) {
			best = n
		}
	}
	p.sent[best]++
	c.Gateway = best
	return c, true
}
