package pebble_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	ch := snowflake.ID(77)
	id := snowflake.FromTime(t0)
	must(t, s.PutMessage(ctx, store.Message{ID: id, ChannelID: ch, Content: "kept"}))
	must(t, s.CreateUser(ctx, store.User{ID: 5, Username: "Kept"}))
	must(t, s.PutGuild(ctx, store.Guild{ID: 9, Name: "g"}))
	must(t, s.Close())
	must(t, s.Close()) // idempotent

	_, err := s.GetMessage(ctx, ch, id)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetMessage after Close: %v, want ErrUnavailable", err)
	}

	s = open(t, dir)
	defer s.Close()
	m, err := s.GetMessage(ctx, ch, id)
	if err != nil || m.Content != "kept" {
		t.Fatalf("after reopen: %+v, %v", m, err)
	}
	if _, err := s.GetUserByName(ctx, "kept"); err != nil {
		t.Fatalf("user after reopen: %v", err)
	}
	if _, err := s.LoadGuild(ctx, 9); err != nil {
		t.Fatalf("guild after reopen: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.PutMessage(ctx, store.Message{ID: 1, ChannelID: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutMessage with a canceled context: %v", err)
	}
}

// Deleting a channel or its guild also drops the channel's messages and
// bucket index (an embedded-store guarantee; not part of the port contract).
func TestDeleteChannelDropsMessages(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	g := snowflake.ID(10)
	must(t, s.PutGuild(ctx, store.Guild{ID: g}))
	for _, ch := range []snowflake.ID{11, 12} {
		must(t, s.PutChannel(ctx, store.Channel{ID: ch, GuildID: g}))
		for i := range 5 {
			id := snowflake.FromTime(t0.Add(time.Duration(i) * 24 * time.Hour * 7))
			must(t, s.PutMessage(ctx, store.Message{ID: id, ChannelID: ch}))
		}
	}
	must(t, s.DeleteChannel(ctx, 11))
	must(t, s.DeleteGuild(ctx, g))
	for _, ch := range []snowflake.ID{11, 12} {
		page, err := s.ListMessages(ctx, ch, store.HistoryQuery{})
		must(t, err)
		b, err := s.Buckets(ctx, ch)
		must(t, err)
		if len(page) != 0 || len(b) != 0 {
			t.Fatalf("channel %v: %d messages, buckets %v after delete", ch, len(page), b)
		}
	}
}

func TestBucketWidth(t *testing.T) {
	ctx := context.Background()
	s, err := pebble.New(pebble.Config{Dir: t.TempDir(), Logger: quietLogger(), BucketWidth: time.Hour})
	must(t, err)
	defer s.Close()
	ch := snowflake.ID(3)
	var ids []snowflake.ID
	for i := range 6 {
		id := snowflake.FromTime(t0.Add(time.Duration(i) * 50 * time.Minute))
		ids = append(ids, id)
		must(t, s.PutMessage(ctx, store.Message{ID: id, ChannelID: ch}))
	}
	var want []int64
	for _, id := range slices.Backward(ids) {
		if b := store.Bucket(id, time.Hour); !slices.Contains(want, b) {
			want = append(want, b)
		}
	}
	got, err := s.Buckets(ctx, ch)
	must(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("Buckets = %v, want %v", got, want)
	}
	page, err := s.ListMessages(ctx, ch, store.HistoryQuery{Before: ids[5], Limit: 3})
	must(t, err)
	if len(page) != 3 || page[0].ID != ids[4] || page[2].ID != ids[2] {
		t.Fatalf("page %+v", page)
	}
}

func TestConfig(t *testing.T) {
	if _, err := pebble.New(pebble.Config{}); err == nil {
		t.Fatal("New without Dir succeeded")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
