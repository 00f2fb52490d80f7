package dataservice

import (
	"context"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/adapters/store/storetest"
)

// TestWrappedConformance: a store with the data service in front still
// passes the storage conformance suite.
func TestWrappedConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := pebble.New(pebble.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return Wrap(s, New(s, Config{}))
	})
}

func TestWrapRoutesMessages(t *testing.T) {
	s, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	svc := New(s, Config{})
	w := Wrap(s, svc)
	ctx := context.Background()
	w.PutMessage(ctx, store.Message{ID: 1 << 22, ChannelID: 5})
	w.ListMessages(ctx, 5, store.HistoryQuery{})
	w.GetMessage(ctx, 5, 1<<22)
	w.Buckets(ctx, 5)
	w.DeleteMessages(ctx, 5, nil)
	w.DeleteMessage(ctx, 5, 1<<22)
	if got := svc.Stats().Requests; got != 6 {
		t.Fatalf("data service saw %d requests, want 6", got)
	}
}
