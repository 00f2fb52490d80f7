package memberlist

import (
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// Range is an inclusive range of row indexes, [first, last].
type Range [2]int

// sub is one session's subscription to one list.
type sub struct {
	s      event.Session
	ranges []Range

	// seen dedupes one index query; gen marks the change whose scratch
	// ops and sig hold.
	seen uint64
	gen  uint64
	ops  []pendingOp
	sig  []byte
}

// pendingOp is an operation computed for one session during a change.
type pendingOp struct {
	step int
	op   Op
}

// covers reports whether any range holds index i.
func (s *sub) covers(i int) bool {
	for _, r := range s.ranges {
		if r[0] <= i && i <= r[1] {
			return true
		}
	}
	return false
}

// maxEnd returns the largest last index of s's ranges.
func (s *sub) maxEnd() int {
	m := -1
	for _, r := range s.ranges {
		m = max(m, r[1])
	}
	return m
}

// clampRanges validates requested ranges: negative starts become 0,
// ranges wider than maxWidth are cut to it, inverted or too-far ranges are
// dropped, duplicates removed, and at most maxRanges kept. It returns the
// ranges kept and an error describing the first refusal, if any.
func clampRanges(req []Range, maxRanges, maxWidth, maxIndex int) ([]Range, error) {
	var err error
	out := make([]Range, 0, min(len(req), maxRanges))
	for _, r := range req {
		if r[0] < 0 {
			r[0] = 0
		}
		if r[1] < r[0] || r[0] > maxIndex {
			if err == nil {
				err = fmt.Errorf("range [%d, %d]: %w", r[0], r[1], ErrBadRange)
			}
			continue
		}
		if r[1]-r[0]+1 > maxWidth {
			r[1] = r[0] + maxWidth - 1
		}
		if slices.Contains(out, r) {
			continue
		}
		if len(out) == maxRanges {
			if err == nil {
				err = fmt.Errorf("%d ranges: %w", len(req), ErrTooManyRanges)
			}
			break
		}
		out = append(out, r)
	}
	return out, err
}

// subIndex finds subscriptions by the indexes their ranges end at, in
// buckets of width w: a range no wider than w that holds index i ends in
// bucket i/w or i/w+1.
type subIndex struct {
	w       int
	buckets []map[*sub]int // sub → number of its ranges ending in the bucket
}

func (x *subIndex) add(s *sub) {
	for _, r := range s.ranges {
		b := r[1] / x.w
		for len(x.buckets) <= b {
			x.buckets = append(x.buckets, nil)
		}
		if x.buckets[b] == nil {
			x.buckets[b] = make(map[*sub]int)
		}
		x.buckets[b][s]++
	}
}

func (x *subIndex) remove(s *sub) {
	for _, r := range s.ranges {
		b := r[1] / x.w
		if m := x.buckets[b]; m != nil {
			if m[s]--; m[s] <= 0 {
				delete(m, s)
			}
		}
	}
}

// covering calls fn once for each subscription with a range holding i.
func (x *subIndex) covering(i int, stamp uint64, fn func(*sub)) {
	first := i / x.w
	for b := first; b <= first+1 && b < len(x.buckets); b++ {
		for s := range x.buckets[b] {
			if s.seen != stamp && s.covers(i) {
				s.seen = stamp
				fn(s)
			}
		}
	}
}

// endingFrom calls fn once for each subscription with a range ending at or
// after i.
func (x *subIndex) endingFrom(i int, stamp uint64, fn func(*sub)) {
	for b := max(i/x.w, 0); b < len(x.buckets); b++ {
		for s := range x.buckets[b] {
			if s.seen != stamp && s.maxEnd() >= i {
				s.seen = stamp
				fn(s)
			}
		}
	}
}
