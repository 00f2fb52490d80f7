package storetest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// testMentionIDs: a record's counted mention ids round-trip, in order, and
// an overwrite replaces them (also with none).
func testMentionIDs(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(2)
	r := readstate.Record{UserID: id[0], ChannelID: id[1], MentionCount: 3, NextOffset: 7,
		Mentions: []snowflake.ID{5, 1 << 40, 1<<62 + 1}}
	if err := s.Write(ctx, []readstate.Record{r}, nil); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := load(ctx, t, s, id[0]); len(got) != 1 || !reflect.DeepEqual(got[0], r) {
		t.Fatalf("LoadUser = %+v, want [%+v]", got, r)
	}
	r.Mentions, r.MentionCount = nil, 0
	if err := s.Write(ctx, []readstate.Record{r}, nil); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := load(ctx, t, s, id[0]); len(got) != 1 || len(got[0].Mentions) != 0 || got[0].MentionCount != 0 {
		t.Fatalf("after clearing LoadUser = %+v, want no mention ids", got)
	}
}

// testClaim: a claim returns the epoch held before, a lower claim fails
// with ErrFenced and changes nothing, the held epoch may be claimed again,
// and LoadUser reports the epoch on every record — also of a user claimed
// before having any record, who loads as no records.
func testClaim(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(3)
	user := id[0]
	if prev, err := s.Claim(ctx, user, 5); err != nil || prev != 0 {
		t.Fatalf("first Claim(5) = %d, %v; want 0, nil", prev, err)
	}
	if recs := load(ctx, t, s, user); len(recs) != 0 {
		t.Fatalf("a claimed user without records loads %+v, want none", recs)
	}
	if prev, err := s.Claim(ctx, user, 9); err != nil || prev != 5 {
		t.Fatalf("Claim(9) = %d, %v; want 5, nil", prev, err)
	}
	if _, err := s.Claim(ctx, user, 7); !errors.Is(err, readstate.ErrFenced) {
		t.Fatalf("Claim(7) below the held 9 = %v, want ErrFenced", err)
	}
	if prev, err := s.Claim(ctx, user, 9); err != nil || prev != 9 {
		t.Fatalf("Claim(9) again = %d, %v; want 9, nil", prev, err)
	}
	recs := []readstate.Record{{UserID: user, ChannelID: id[1], LastReadID: 3, Epoch: 9}, {UserID: user, ChannelID: id[2], MentionCount: 1, Epoch: 9}}
	if err := s.Write(ctx, recs, nil); err != nil {
		t.Fatalf("Write at the held epoch: %v", err)
	}
	if got := load(ctx, t, s, user); !reflect.DeepEqual(got, recs) {
		t.Fatalf("LoadUser = %+v, want %+v (each with epoch 9)", got, recs)
	}
}

// testFencedWrite: once a later owner claimed a user, a write carrying the
// earlier epoch — or none — changes none of the user's records, and the
// later owner's record stays.
func testFencedWrite(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(2)
	user, ch := id[0], id[1]
	if _, err := s.Claim(ctx, user, 3); err != nil {
		t.Fatal(err)
	}
	old := readstate.Record{UserID: user, ChannelID: ch, LastReadID: 100, Version: 1, Epoch: 3}
	if err := s.Write(ctx, []readstate.Record{old}, nil); err != nil {
		t.Fatalf("Write at epoch 3: %v", err)
	}
	if _, err := s.Claim(ctx, user, 4); err != nil {
		t.Fatal(err)
	}
	newer := readstate.Record{UserID: user, ChannelID: ch, LastReadID: 200, Version: 2, Epoch: 4}
	if err := s.Write(ctx, []readstate.Record{newer}, nil); err != nil {
		t.Fatalf("Write at epoch 4: %v", err)
	}
	for _, epoch := range []int64{3, 0} {
		stale := readstate.Record{UserID: user, ChannelID: ch, LastReadID: 150, Version: 5, Epoch: epoch}
		err := s.Write(ctx, []readstate.Record{stale}, nil)
		var fe *readstate.FencedError
		if !errors.As(err, &fe) || !errors.Is(err, readstate.ErrFenced) || !reflect.DeepEqual(fe.Users, []snowflake.ID{user}) {
			t.Fatalf("Write at epoch %d after a claim at 4 = %v, want a FencedError naming user %d", epoch, err, user)
		}
	}
	if got := load(ctx, t, s, user); len(got) != 1 || !reflect.DeepEqual(got[0], newer) {
		t.Fatalf("after fenced writes LoadUser = %+v, want the later owner's [%+v]", got, newer)
	}
}

// testFencedUsersOnly: a Write that carries a fenced user's records and
// another user's writes the other user and the channel records.
func testFencedUsersOnly(t *testing.T, s readstate.Store) {
	ctx := ctxFor(t)
	id := ids(4)
	fencedUser, freeUser, ch := id[0], id[1], id[2]
	if _, err := s.Claim(ctx, fencedUser, 8); err != nil {
		t.Fatal(err)
	}
	free := readstate.Record{UserID: freeUser, ChannelID: ch, LastReadID: 9}
	chRec := readstate.ChannelRecord{ChannelID: id[3], NextOffset: 4}
	err := s.Write(ctx, []readstate.Record{{UserID: fencedUser, ChannelID: ch, LastReadID: 9, Epoch: 7}, free},
		[]readstate.ChannelRecord{chRec})
	var fe *readstate.FencedError
	if !errors.As(err, &fe) || !reflect.DeepEqual(fe.Users, []snowflake.ID{fencedUser}) {
		t.Fatalf("Write = %v, want a FencedError naming only user %d", err, fencedUser)
	}
	if got := load(ctx, t, s, fencedUser); len(got) != 0 {
		t.Fatalf("fenced user's records = %+v, want none written", got)
	}
	if got := load(ctx, t, s, freeUser); !reflect.DeepEqual(got, []readstate.Record{free}) {
		t.Fatalf("other user's records = %+v, want [%+v]", got, free)
	}
	if got, ok, err := s.LoadChannel(ctx, id[3]); err != nil || !ok || got.NextOffset != 4 {
		t.Fatalf("channel record = %+v, %v, %v; want written", got, ok, err)
	}
}
