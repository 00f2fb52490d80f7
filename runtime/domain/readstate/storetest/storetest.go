// Package storetest is the conformance suite of readstate.Store: the
// embedded Pebble table runs it always, the Cassandra table against the
// server `make test` starts.
package storetest

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// NewFunc returns an empty Store for one test and registers its cleanup.
type NewFunc func(t testing.TB) readstate.Store

// Run runs the suite.
func Run(t *testing.T, newStore NewFunc) {
	cases := []struct {
		name string
		fn   func(*testing.T, readstate.Store)
	}{
		{"Empty", testEmpty},
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"UsersAreIsolated", testUsersIsolated},
		{"ChannelRecords", testChannelRecords},
		{"MentionIDs", testMentionIDs},
		{"ClaimRaisesEpoch", testClaim},
		{"WriteFencedByLaterClaim", testFencedWrite},
		{"FencedUsersOnly", testFencedUsersOnly},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ids returns ids unique to this run, so a shared server's old rows never
// match.
func ids(n int) []snowflake.ID {
	base := snowflake.FromTime(time.Now()) + snowflake.ID(time.Now().Nanosecond()%1_000_000)
	out := make([]snowflake.ID, n)
	for i := range out {
		out[i] = base + snowflake.ID(i)
	}
	return out
}

func load(ctx context.Context, t *testing.T, s readstate.Store, user snowflake.ID) []readstate.Record {
	t.Helper()
	recs, err := s.LoadUser(ctx, user)
	if err != nil {
		t.Fatalf("LoadUser: %v", err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ChannelID < recs[j].ChannelID })
	return recs
}

func testEmpty(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(2)
	if recs := load(ctx, t, s, id[0]); len(recs) != 0 {
		t.Fatalf("LoadUser of an unknown user = %+v, want none", recs)
	}
	if _, ok, err := s.LoadChannel(ctx, id[1]); ok || err != nil {
		t.Fatalf("LoadChannel of an unknown channel = %v, %v; want not found", ok, err)
	}
	if err := s.Write(ctx, nil, nil); err != nil {
		t.Fatalf("empty Write: %v", err)
	}
}

func testRoundTrip(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(3)
	user, ch1, ch2 := id[0], id[1], id[2]
	want := []readstate.Record{
		{UserID: user, ChannelID: ch1, LastReadID: 1 << 60, MentionCount: 7, Flags: 3, Version: 9, NextOffset: 1234},
		{UserID: user, ChannelID: ch2, LastReadID: 5},
	}
	if err := s.Write(ctx, want, nil); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := load(ctx, t, s, user); !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadUser = %+v, want %+v", got, want)
	}
}

func testOverwrite(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(2)
	r := readstate.Record{UserID: id[0], ChannelID: id[1], MentionCount: 4, NextOffset: 10}
	if err := s.Write(ctx, []readstate.Record{r}, nil); err != nil {
		t.Fatalf("Write: %v", err)
	}
	r.MentionCount, r.LastReadID, r.Version, r.NextOffset = 0, 77, 1, 10
	if err := s.Write(ctx, []readstate.Record{r}, nil); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := load(ctx, t, s, id[0]); len(got) != 1 || !reflect.DeepEqual(got[0], r) {
		t.Fatalf("after overwrite LoadUser = %+v, want [%+v]", got, r)
	}
}

func testUsersIsolated(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(4)
	a := readstate.Record{UserID: id[0], ChannelID: id[2], MentionCount: 1}
	b := readstate.Record{UserID: id[1], ChannelID: id[2], MentionCount: 2}
	c := readstate.Record{UserID: id[1], ChannelID: id[3], MentionCount: 3}
	if err := s.Write(ctx, []readstate.Record{a, b, c}, nil); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := load(ctx, t, s, id[0]); !reflect.DeepEqual(got, []readstate.Record{a}) {
		t.Fatalf("LoadUser(a) = %+v", got)
	}
	if got := load(ctx, t, s, id[1]); !reflect.DeepEqual(got, []readstate.Record{b, c}) {
		t.Fatalf("LoadUser(b) = %+v", got)
	}
}

func testChannelRecords(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(2)
	want := readstate.ChannelRecord{
		ChannelID:  id[0],
		Everyone:   []readstate.ChannelMention{{MessageID: 10, AuthorID: 1}, {MessageID: 1 << 62, AuthorID: 2}},
		NextOffset: 99,
		Seen:       []readstate.SeenMessage{{MessageID: 10, Offset: 3}, {MessageID: 1 << 62, Offset: 98}},
	}
	other := readstate.ChannelRecord{ChannelID: id[1], NextOffset: 1}
	if err := s.Write(ctx, []readstate.Record{{UserID: id[1], ChannelID: id[0]}}, []readstate.ChannelRecord{want, other}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, ok, err := s.LoadChannel(ctx, id[0])
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadChannel = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	got, ok, err = s.LoadChannel(ctx, id[1])
	if err != nil || !ok || got.NextOffset != 1 || len(got.Everyone) != 0 || len(got.Seen) != 0 {
		t.Fatalf("LoadChannel(other) = %+v, %v, %v", got, ok, err)
	}
	want.Everyone = want.Everyone[1:]
	if err := s.Write(ctx, nil, []readstate.ChannelRecord{want}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got, _, _ := s.LoadChannel(ctx, id[0]); !reflect.DeepEqual(got, want) {
		t.Fatalf("after overwrite LoadChannel = %+v, want %+v", got, want)
	}
}
