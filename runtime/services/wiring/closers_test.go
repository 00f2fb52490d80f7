package wiring

import (
	"errors"
	"slices"
	"testing"
)

// TestClosersCloseLastFirstOnce: Close runs what was added in reverse,
// joins the errors, and a second Close runs nothing.
func TestClosersCloseLastFirstOnce(t *testing.T) {
	var c Closers
	var order []int
	boom := errors.New("boom")
	for i := range 3 {
		c.Add(func() error {
			order = append(order, i)
			if i == 1 {
				return boom
			}
			return nil
		})
	}
	if err := c.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the joined %v", err, boom)
	}
	if !slices.Equal(order, []int{2, 1, 0}) {
		t.Fatalf("closed in order %v, want [2 1 0]", order)
	}
	if err := c.Close(); err != nil || len(order) != 3 {
		t.Fatalf("second Close = %v after %v: it ran again", err, order)
	}
}
