package wiring

import (
	"errors"
	"slices"
	"testing"
)

// A seam a role provides is what its consumers get; a shared seam is
// opened once per process, whoever asks first; keys of the same name and
// another type are other seams; Close closes what was opened, in reverse.
func TestSeams(t *testing.T) {
	var s Seams
	k := Key[string]{Name: "x"}
	if _, ok := Lookup(&s, k); ok {
		t.Fatal("an empty seam set has a value")
	}
	Provide(&s, k, "local")
	if v, ok := Lookup(&s, k); !ok || v != "local" {
		t.Fatalf("provided seam: %q %v", v, ok)
	}
	if _, ok := Lookup(&s, Key[int]{Name: "x"}); ok {
		t.Fatal("a key of another type found the string seam")
	}
	var opened int
	var closed []string
	open := func(name string) func() (string, func() error, error) {
		return func() (string, func() error, error) {
			opened++
			return name, func() error { closed = append(closed, name); return nil }, nil
		}
	}
	for range 2 {
		if v, err := Shared(&s, Key[string]{Name: "a"}, open("a")); err != nil || v != "a" {
			t.Fatalf("shared a: %q %v", v, err)
		}
	}
	if v, err := Shared(&s, k, open("remote")); err != nil || v != "local" {
		t.Fatalf("a shared seam a role provided: %q %v, want the provided one", v, err)
	}
	if _, err := Shared(&s, Key[string]{Name: "b"}, open("b")); err != nil {
		t.Fatal(err)
	}
	if opened != 2 {
		t.Fatalf("opened %d times, want 2 (a once, b once)", opened)
	}
	if _, err := Shared(&s, Key[string]{Name: "c"}, func() (string, func() error, error) { return "", nil, errors.New("down") }); err == nil {
		t.Fatal("a seam that failed to open answered")
	}
	if _, ok := Lookup(&s, Key[string]{Name: "c"}); ok {
		t.Fatal("a seam that failed to open was kept")
	}
	if err := s.Close(); err != nil || !slices.Equal(closed, []string{"b", "a"}) {
		t.Fatalf("close: %v, closed %v, want [b a]", err, closed)
	}
}
