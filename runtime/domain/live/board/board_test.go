package board_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/live/board"
)

func TestWatchSnapshotThenChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := board.New()
	b.Put(ctx, "live/a", []byte("1"), registry.Persistent)
	b.Put(ctx, "other/x", []byte("0"), registry.Persistent)
	ch, err := b.WatchKV(ctx, "live/")
	if err != nil {
		t.Fatal(err)
	}
	u := <-ch
	if !u.Snapshot || len(u.Changes) != 1 || u.Changes[0].Key != "live/a" {
		t.Fatalf("snapshot = %+v", u)
	}
	b.Put(ctx, "live/b", []byte("2"), registry.WhileAlive)
	b.Delete(ctx, "live/a")
	b.Put(ctx, "other/y", nil, registry.Persistent)
	u = <-ch
	if u.Changes[0].Key != "live/b" || string(u.Changes[0].Value) != "2" {
		t.Fatalf("put = %+v", u)
	}
	u = <-ch
	if u.Changes[0].Key != "live/a" || !u.Changes[0].Deleted {
		t.Fatalf("delete = %+v", u)
	}
	if _, err := b.Get(ctx, "live/a"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("Get deleted = %v", err)
	}
	m, _ := b.List(ctx, "live/")
	if len(m) != 1 || string(m["live/b"]) != "2" {
		t.Fatalf("List = %v", m)
	}
}

// TestOpenKeepsPersistentKeys: a board opened on the file an earlier one
// wrote has its Persistent keys, not its WhileAlive ones, and not the
// keys it deleted.
func TestOpenKeepsPersistentKeys(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/board.json"
	b, err := board.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b.Put(ctx, "live/bans/user/1", []byte(`{"by":"2"}`), registry.Persistent)
	b.Put(ctx, "live/bans/user/3", []byte(`{}`), registry.Persistent)
	b.Put(ctx, "live/viewers/9/gw", []byte(`{"n":4}`), registry.WhileAlive)
	b.Delete(ctx, "live/bans/user/3")
	b.Put(ctx, "live/rules/global", []byte(`{"blocked_terms":["x"]}`), registry.Persistent)
	b.Put(ctx, "live/rules/global", []byte(`{"blocked_terms":["y"]}`), registry.Persistent)

	again, err := board.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := again.List(ctx, "live/")
	if len(got) != 2 || string(got["live/bans/user/1"]) != `{"by":"2"}` || string(got["live/rules/global"]) != `{"blocked_terms":["y"]}` {
		t.Fatalf("reopened board = %q", got)
	}
	ch, err := again.WatchKV(ctx, "live/bans/")
	if err != nil {
		t.Fatal(err)
	}
	if u := <-ch; !u.Snapshot || len(u.Changes) != 1 || u.Changes[0].Key != "live/bans/user/1" {
		t.Fatalf("snapshot after reopen = %+v", u)
	}
}
