package readstate_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// handOff is a readstate.Mentions recording what the consumer hands over
// and passing it to owner.
type handOff struct {
	mu    sync.Mutex
	got   []readstate.Mention
	owner *readstate.Service
}

func (h *handOff) AddMentions(ctx context.Context, ms []readstate.Mention) error {
	h.mu.Lock()
	h.got = append(h.got, ms...)
	h.mu.Unlock()
	return h.owner.AddMentions(ctx, ms)
}

// TestMentionsHandedToOwner: the consumer counts nothing itself: it hands
// each user mention, with its offset, to Config.Mentions, and the owner's
// count is durable before the hand-off returns (a second service on the
// same table, the next owner, sees it without any flush) and counted once
// however often it is handed over again.
func TestMentionsHandedToOwner(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, "")
	owner := newService(t, readstate.Config{}, st, &visibility{}, nil)
	h := &handOff{owner: owner}
	consumer := newService(t, readstate.Config{Mentions: h}, st, &visibility{}, nil)
	for _, r := range []struct {
		id  snowflake.ID
		off int64
	}{{1000, 5}, {1001, 6}, {1000, 5}} { // the last one redelivered
		if err := consumer.Apply(ctx, msg(t, r.id, r.off, channel, []snowflake.ID{alice, bob}, nil, false)); err != nil {
			t.Fatal(err)
		}
	}
	want := []readstate.Mention{
		{User: alice, Channel: channel, Message: 1000, Offset: 5}, {User: bob, Channel: channel, Message: 1000, Offset: 5},
		{User: alice, Channel: channel, Message: 1001, Offset: 6}, {User: bob, Channel: channel, Message: 1001, Offset: 6},
	}
	if !slices.Equal(h.got[:4], want) {
		t.Fatalf("handed over %+v, want %+v first", h.got, want)
	}
	if n := mentionCount(t, owner, alice, channel); n != 2 {
		t.Fatalf("owner counts %d mentions of alice, want 2", n)
	}
	// The next owner loads from the table: both counted, and a hand-off
	// retried there (the first owner died after writing) is skipped.
	next := newService(t, readstate.Config{}, st, &visibility{}, nil)
	if err := next.AddMentions(ctx, want[2:]); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, next, bob, channel); n != 2 {
		t.Fatalf("next owner counts %d mentions of bob, want 2 (durable, once)", n)
	}
	// A mention at or below the user's read marker does not count.
	if _, err := next.Ack(ctx, carol, channel, 2000); err != nil {
		t.Fatal(err)
	}
	if err := next.AddMentions(ctx, []readstate.Mention{{User: carol, Channel: channel, Message: 1500, Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, next, carol, channel); n != 0 {
		t.Fatalf("mention below the marker counted: %d", n)
	}
}

// TestReleaseHandsUsersOver: Release writes what a moved user's owner has
// only in memory (an ack) and forgets the user, so the next owner loads
// the ack, and the first owner, when the user comes back, loads what the
// other owner counted meanwhile.
func TestReleaseHandsUsersOver(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, "")
	a := newService(t, readstate.Config{}, st, &visibility{}, nil)
	b := newService(t, readstate.Config{}, st, &visibility{}, nil)
	if _, err := a.Ack(ctx, alice, channel, 900); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ChannelState(ctx, bob, channel); err != nil { // bob cached on a, stays
		t.Fatal(err)
	}
	if err := a.Release(ctx, func(u snowflake.ID) bool { return u != alice }); err != nil {
		t.Fatal(err)
	}
	if s, err := b.ChannelState(ctx, alice, channel); err != nil || s.LastReadID != 900 {
		t.Fatalf("next owner sees %+v, %v; want the released ack (900)", s, err)
	}
	if err := b.AddMentions(ctx, []readstate.Mention{{User: alice, Channel: channel, Message: 1000, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, a, alice, channel); n != 1 {
		t.Fatalf("first owner, alice back, counts %d; want the other owner's 1", n)
	}
}
