package pebble_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/readstate"
	rspebble "github.com/concord-chat/concord/runtime/domain/readstate/pebble"
	"github.com/concord-chat/concord/runtime/domain/readstate/storetest"
)

func TestRoundTripAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := rspebble.New(rspebble.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	recs := []readstate.Record{
		{UserID: 7, ChannelID: 1, LastReadID: 10, MentionCount: 2, Flags: 1, Version: 3, NextOffset: 9},
		{UserID: 7, ChannelID: 2, LastReadID: 20},
		{UserID: 8, ChannelID: 1, MentionCount: 5},
	}
	ch := readstate.ChannelRecord{ChannelID: 1, Everyone: []readstate.ChannelMention{{MessageID: 11, AuthorID: 4}},
		NextOffset: 12, Seen: []readstate.SeenMessage{{MessageID: 11, Offset: 11}}}
	if err := s.Write(ctx, recs, []readstate.ChannelRecord{ch}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = rspebble.New(rspebble.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.LoadUser(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs[:2]) {
		t.Fatalf("LoadUser(7) = %+v, want %+v", got, recs[:2])
	}
	gc, ok, err := s.LoadChannel(ctx, 1)
	if err != nil || !ok || !reflect.DeepEqual(gc, ch) {
		t.Fatalf("LoadChannel(1) = %+v %v %v, want %+v", gc, ok, err, ch)
	}
	if _, ok, err := s.LoadChannel(ctx, 2); ok || err != nil {
		t.Fatalf("LoadChannel(2) = %v %v, want not found", ok, err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB) readstate.Store {
		s, err := rspebble.New(rspebble.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
