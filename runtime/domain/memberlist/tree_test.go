package memberlist

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTreeAgainstSortedSlice drives a Tree and a plain sorted slice with
// the same random operations and compares every answer.
func TestTreeAgainstSortedSlice(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		tr := NewTree(cmp.Compare[int])
		var ref []int
		for step := range 4000 {
			k := rng.IntN(600)
			switch rng.IntN(4) {
			case 0, 1:
				i, ok := tr.Insert(k)
				j, found := slices.BinarySearch(ref, k)
				if ok == found || i != j {
					t.Fatalf("seed %d step %d: Insert(%d) = %d,%v; want %d,%v", seed, step, k, i, ok, j, !found)
				}
				if !found {
					ref = slices.Insert(ref, j, k)
				}
			case 2:
				i, ok := tr.Delete(k)
				j, found := slices.BinarySearch(ref, k)
				if ok != found || (found && i != j) {
					t.Fatalf("seed %d step %d: Delete(%d) = %d,%v; want %d,%v", seed, step, k, i, ok, j, found)
				}
				if found {
					ref = slices.Delete(ref, j, j+1)
				}
			case 3:
				i, ok := tr.Rank(k)
				j, found := slices.BinarySearch(ref, k)
				if ok != found || i != j {
					t.Fatalf("seed %d step %d: Rank(%d) = %d,%v; want %d,%v", seed, step, k, i, ok, j, found)
				}
			}
			if tr.Len() != len(ref) {
				t.Fatalf("seed %d step %d: Len = %d, want %d", seed, step, tr.Len(), len(ref))
			}
			if len(ref) > 0 {
				i := rng.IntN(len(ref))
				if got, ok := tr.At(i); !ok || got != ref[i] {
					t.Fatalf("seed %d step %d: At(%d) = %d,%v; want %d", seed, step, i, got, ok, ref[i])
				}
			}
			a := rng.IntN(len(ref)+20) - 10
			b := a + rng.IntN(120)
			var got []int
			tr.Range(a, b, func(i, k int) bool {
				if k != ref[i] {
					t.Fatalf("seed %d step %d: Range yields %d at %d, want %d", seed, step, k, i, ref[i])
				}
				got = append(got, k)
				return true
			})
			want := ref[min(max(a, 0), len(ref)):min(max(b+1, 0), len(ref))]
			if max(a, 0) > b {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: Range(%d,%d) = %v, want %v", seed, step, a, b, got, want)
			}
		}
		if _, ok := tr.At(len(ref)); ok {
			t.Fatalf("At(len) found a key")
		}
	}
}

// TestTreeRangeStopsEarly checks that Range honours fn's false.
func TestTreeRangeStopsEarly(t *testing.T) {
	tr := NewTree(cmp.Compare[int])
	for i := range 50 {
		tr.Insert(i * 2)
	}
	var got []int
	tr.Range(10, 40, func(_ int, k int) bool {
		got = append(got, k)
		return len(got) < 3
	})
	if !slices.Equal(got, []int{20, 22, 24}) {
		t.Fatalf("Range = %v", got)
	}
}
