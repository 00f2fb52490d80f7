package memberlist

// Tree is an order-statistic treap: a balanced binary search tree whose
// nodes count their subtrees, so that inserting, deleting, finding a key's
// index (Rank) and finding the key at an index (At) each take O(log n)
// expected time, and reading w consecutive rows takes O(log n + w).
//
// Keys must be distinct under the comparison. The zero Tree is not usable;
// create one with NewTree. A Tree is not safe for concurrent use.
type Tree[K any] struct {
	cmp  func(a, b K) int
	root *node[K]
	seed uint64
}

type node[K any] struct {
	key         K
	prio        uint64
	size        int
	left, right *node[K]
}

// NewTree returns an empty tree ordered by cmp, which returns a negative
// number when a sorts before b, zero when they are equal and a positive
// number otherwise.
func NewTree[K any](cmp func(a, b K) int) *Tree[K] {
	return &Tree[K]{cmp: cmp, seed: 0x9e3779b97f4a7c15}
}

// Len returns the number of keys.
func (t *Tree[K]) Len() int { return size(t.root) }

func size[K any](n *node[K]) int {
	if n == nil {
		return 0
	}
	return n.size
}

func (n *node[K]) fix() { n.size = 1 + size(n.left) + size(n.right) }

// next returns the next priority (xorshift64*): deterministic per tree, no
// shared state.
func (t *Tree[K]) next() uint64 {
	t.seed ^= t.seed >> 12
	t.seed ^= t.seed << 25
	t.seed ^= t.seed >> 27
	return t.seed * 0x2545f4914f6cdd1d
}

// split divides n into keys before k (or also equal to k when orEqual) and
// the rest.
func (t *Tree[K]) split(n *node[K], k K, orEqual bool) (*node[K], *node[K]) {
	if n == nil {
		return nil, nil
	}
	c := t.cmp(n.key, k)
	if c < 0 || (orEqual && c == 0) {
		l, r := t.split(n.right, k, orEqual)
		n.right = l
		n.fix()
		return n, r
	}
	l, r := t.split(n.left, k, orEqual)
	n.left = r
	n.fix()
	return l, n
}

// merge joins two trees where every key of a sorts before every key of b.
func merge[K any](a, b *node[K]) *node[K] {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = merge(a.right, b)
		a.fix()
		return a
	default:
		b.left = merge(a, b.left)
		b.fix()
		return b
	}
}

// Insert adds k and returns its index. If an equal key is present the tree
// is unchanged and Insert returns that key's index and false.
func (t *Tree[K]) Insert(k K) (int, bool) {
	if i, ok := t.Rank(k); ok {
		return i, false
	}
	l, r := t.split(t.root, k, false)
	i := size(l)
	t.root = merge(merge(l, &node[K]{key: k, prio: t.next(), size: 1}), r)
	return i, true
}

// Delete removes k and returns the index it had, or -1 and false when k is
// absent.
func (t *Tree[K]) Delete(k K) (int, bool) {
	i, ok := t.Rank(k)
	if !ok {
		return -1, false
	}
	l, r := t.split(t.root, k, false)
	_, r = t.split(r, k, true)
	t.root = merge(l, r)
	return i, true
}

// Rank returns k's index and true, or the index k would have and false.
func (t *Tree[K]) Rank(k K) (int, bool) {
	i := 0
	for n := t.root; n != nil; {
		switch c := t.cmp(k, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			i += size(n.left) + 1
			n = n.right
		default:
			return i + size(n.left), true
		}
	}
	return i, false
}

// At returns the key at index i, or false when i is out of range.
func (t *Tree[K]) At(i int) (K, bool) {
	n := t.root
	for n != nil {
		ls := size(n.left)
		switch {
		case i < ls:
			n = n.left
		case i > ls:
			i -= ls + 1
			n = n.right
		default:
			return n.key, true
		}
	}
	var zero K
	return zero, false
}

// Range calls fn for the keys at indexes a through b inclusive, in order,
// clipped to the tree, stopping early if fn returns false.
func (t *Tree[K]) Range(a, b int, fn func(i int, k K) bool) {
	if a < 0 {
		a = 0
	}
	if b >= t.Len() {
		b = t.Len() - 1
	}
	if a > b {
		return
	}
	// Descend to index a, keeping the nodes whose key comes after it.
	var stack []*node[K]
	n, i := t.root, a
	for n != nil {
		ls := size(n.left)
		switch {
		case i < ls:
			stack = append(stack, n)
			n = n.left
		case i > ls:
			i -= ls + 1
			n = n.right
		default:
			stack = append(stack, n)
			n = nil
		}
	}
	for idx := a; idx <= b && len(stack) > 0; idx++ {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !fn(idx, n.key) {
			return
		}
		for c := n.right; c != nil; c = c.left {
			stack = append(stack, c)
		}
	}
}
