package pebblestore_test

import (
	"context"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/pebblestore"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/storetest"
)

func TestConformance(t *testing.T) {
	s, err := pebblestore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Run(t, s)
}

// TestReopen checks that acknowledged writes are on disk.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PutStream(ctx, live.Stream{ID: 1, CreatorID: 2, State: live.StateLive}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.GetStream(ctx, 1); err != nil || st.CreatorID != 2 {
		t.Fatalf("after reopen = %+v, %v", st, err)
	}
}
