package wiring

import "testing"

// A Late holds nothing until set; LateOf gives every asker of a process
// the same one, so what a later role sets is what an earlier one reads.
func TestLateOf(t *testing.T) {
	var s Seams
	k := Key[string]{Name: "late-test"}
	early := LateOf(&s, k)
	if v, ok := early.Get(); ok || v != "" {
		t.Fatalf("unset Late = %q, %v", v, ok)
	}
	LateOf(&s, k).Set("provided")
	if v, ok := early.Get(); !ok || v != "provided" {
		t.Fatalf("after Set through another LateOf: %q, %v", v, ok)
	}
	if v, ok := LateOf(&s, Key[string]{Name: "other"}).Get(); ok {
		t.Fatalf("another key's Late holds %q", v)
	}
}
