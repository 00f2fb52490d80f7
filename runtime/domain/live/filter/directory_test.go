package filter

import (
	"encoding/json"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// TestDirectoryKeepsTheNewerStream: an instance's own save (Remember) is
// read back at once, and an older copy the watch delivers afterwards
// does not replace it; a newer one does, and a deletion always applies.
func TestDirectoryKeepsTheNewerStream(t *testing.T) {
	d := NewDirectory(nil)
	change := func(s live.Stream) registry.KVChange {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return registry.KVChange{Key: StreamKey(s.ID), Value: b}
	}
	v1 := live.Stream{ID: 7, Title: "t", StreamURL: "https://a.example/v", Version: 1}
	d.apply(registry.KVUpdate{Snapshot: true, Changes: []registry.KVChange{change(v1)}})
	v2 := v1
	v2.StreamURL, v2.Version = "", 2
	d.Remember(v2)
	if s, _ := d.Stream(7); s.StreamURL != "" || s.Version != 2 {
		t.Fatalf("after Remember(v2): %+v, want the cleared URL at version 2", s)
	}
	// The watch delivers the older write late.
	d.apply(registry.KVUpdate{Changes: []registry.KVChange{change(v1)}})
	if s, _ := d.Stream(7); s.Version != 2 || s.StreamURL != "" {
		t.Fatalf("an older copy from the watch replaced the newer one: %+v", s)
	}
	v3 := v2
	v3.Title, v3.Version = "renamed", 3
	d.apply(registry.KVUpdate{Changes: []registry.KVChange{change(v3)}})
	if s, _ := d.Stream(7); s.Title != "renamed" {
		t.Fatalf("a newer copy from the watch was ignored: %+v", s)
	}
	d.apply(registry.KVUpdate{Changes: []registry.KVChange{{Key: StreamKey(7), Deleted: true}}})
	if _, ok := d.Stream(7); ok {
		t.Fatal("a deleted stream is still in the directory")
	}
}
