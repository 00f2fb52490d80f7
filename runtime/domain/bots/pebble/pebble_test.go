package pebble_test

import (
	"context"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/bots/botstest"
	"github.com/concord-chat/concord/runtime/domain/bots/pebble"
)

func TestConformance(t *testing.T) {
	botstest.Run(t, func(t *testing.T) bots.Store {
		s, err := pebble.New(pebble.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestReopen checks that acknowledged writes survive closing and
// reopening the database.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := pebble.New(pebble.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApplication(ctx, bots.Application{ID: 1, BotUserID: 2, OwnerID: 3, Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetApplication(ctx, 1); err == nil {
		t.Fatal("GetApplication on a closed store succeeded")
	}
	s, err = pebble.New(pebble.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a, err := s.ApplicationByBot(ctx, 2); err != nil || a.Name != "x" {
		t.Fatalf("after reopen: %+v, %v", a, err)
	}
}

func BenchmarkUpdateInteraction(b *testing.B) {
	s, err := pebble.New(pebble.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	botstest.Bench(b, s)
}
