package readstate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

func TestMentionsAndAck(t *testing.T) {
	ctx := context.Background()
	s := newService(t, readstate.Config{}, newStore(t, ""), &visibility{}, nil)
	for i, id := range []snowflake.ID{1000, 1001, 1002} {
		if err := s.Apply(ctx, msg(t, id, int64(i), channel, []snowflake.ID{alice}, nil, false)); err != nil {
			t.Fatal(err)
		}
	}
	if n := mentionCount(t, s, alice, channel); n != 3 {
		t.Fatalf("alice has %d mentions, want 3", n)
	}
	if n := mentionCount(t, s, author, channel); n != 0 {
		t.Fatalf("the author has %d mentions, want 0", n)
	}
	ack, err := s.Ack(ctx, alice, channel, 1002)
	if err != nil {
		t.Fatal(err)
	}
	if ack != (readstate.MessageAck{ChannelID: channel, MessageID: 1002, MentionCount: 0, Version: 1}) {
		t.Fatalf("MESSAGE_ACK %+v", ack)
	}
	if n := mentionCount(t, s, alice, channel); n != 0 {
		t.Fatalf("after ack alice has %d mentions, want 0", n)
	}
	// A mention of a message she already read past does not count.
	if err := s.Apply(ctx, msg(t, 999, 3, channel, []snowflake.ID{alice}, nil, false)); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, msg(t, 1003, 4, channel, []snowflake.ID{alice}, nil, false)); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, s, alice, channel); n != 1 {
		t.Fatalf("alice has %d mentions, want 1 (only the one after her marker)", n)
	}
	states, err := s.States(ctx, alice, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := readstate.State{ChannelID: channel, LastReadID: 1002, MentionCount: 1}
	if len(states) != 1 || states[0] != want {
		t.Fatalf("READY states %+v, want [%+v]", states, want)
	}
	if !readstate.Unread(1003, states[0]) || readstate.Unread(1002, states[0]) {
		t.Fatal("Unread must compare the channel's last message id with the marker")
	}
}

func TestRoleMentionCountsOncePerMessage(t *testing.T) {
	ctx := context.Background()
	s := newService(t, readstate.Config{}, newStore(t, ""), &visibility{}, roles{mods: {alice, bob, author}})
	if err := s.Apply(ctx, msg(t, 1000, 0, channel, []snowflake.ID{alice}, []snowflake.ID{mods}, false)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user snowflake.ID
		want int
	}{{alice, 1}, {bob, 1}, {carol, 0}, {author, 0}} {
		if n := mentionCount(t, s, c.user, channel); n != c.want {
			t.Errorf("user %d has %d mentions, want %d", c.user, n, c.want)
		}
	}
}

func TestInvisibleChannelNeverCounts(t *testing.T) {
	ctx := context.Background()
	vis := &visibility{}
	vis.deny(alice, hidden)
	s := newService(t, readstate.Config{}, newStore(t, ""), vis, roles{mods: {alice}})
	if err := s.Apply(ctx, msg(t, 1000, 0, hidden, []snowflake.ID{alice, bob}, []snowflake.ID{mods}, true)); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, s, alice, hidden); n != 0 {
		t.Fatalf("alice has %d mentions in a channel she cannot see", n)
	}
	if n := mentionCount(t, s, bob, hidden); n != 2 {
		t.Fatalf("bob has %d mentions, want 2 (his own and @everyone)", n)
	}
	states, err := s.States(ctx, alice, []snowflake.ID{channel, hidden})
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 1 || states[0].ChannelID != channel {
		t.Fatalf("READY lists %+v; the hidden channel must be left out", states)
	}
	if _, err := s.Ack(ctx, alice, hidden, 1000); !errors.Is(err, readstate.ErrForbidden) {
		t.Fatalf("ack in a hidden channel: %v, want ErrForbidden", err)
	}
}

func TestEveryoneIsOneChannelLevelWrite(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, "")
	vis := &visibility{}
	s := newService(t, readstate.Config{}, st, vis, nil)
	if err := s.Apply(ctx, msg(t, 1000, 0, channel, nil, nil, true)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if u, c := st.users.Load(), st.channels.Load(); u != 0 || c != 1 {
		t.Fatalf("@everyone wrote %d user records and %d channel records, want 0 and 1", u, c)
	}
	if vis.calls.Load() != 0 {
		t.Fatalf("@everyone asked visibility %d times while consuming, want 0 (checked when read)", vis.calls.Load())
	}
	// Every member sees it; acking clears it for that member only.
	for _, u := range []snowflake.ID{alice, bob, 123456} {
		if n := mentionCount(t, s, u, channel); n != 1 {
			t.Fatalf("user %d has %d mentions, want 1", u, n)
		}
	}
	if n := mentionCount(t, s, author, channel); n != 0 {
		t.Fatalf("the author of @everyone has %d mentions", n)
	}
	if _, err := s.Ack(ctx, alice, channel, 1000); err != nil {
		t.Fatal(err)
	}
	if a, b := mentionCount(t, s, alice, channel), mentionCount(t, s, bob, channel); a != 0 || b != 1 {
		t.Fatalf("after alice's ack: alice %d, bob %d; want 0 and 1", a, b)
	}
}

func TestRedeliveryIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := newService(t, readstate.Config{}, newStore(t, ""), &visibility{}, nil)
	r := msg(t, 1000, 7, channel, []snowflake.ID{alice}, nil, true)
	for i := 0; i < 3; i++ { // the log redelivers the same record
		if err := s.Apply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	dup := msg(t, 1000, 9, channel, []snowflake.ID{alice}, nil, true) // the outbox published it twice
	if err := s.Apply(ctx, dup); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, s, alice, channel); n != 2 {
		t.Fatalf("alice has %d mentions, want 2 (one user mention, one @everyone)", n)
	}
	if n := mentionCount(t, s, bob, channel); n != 1 {
		t.Fatalf("bob has %d mentions, want 1", n)
	}
}

func TestDeleteRemovesEveryone(t *testing.T) {
	ctx := context.Background()
	s := newService(t, readstate.Config{}, newStore(t, ""), &visibility{}, nil)
	if err := s.Apply(ctx, msg(t, 1000, 0, channel, nil, nil, true)); err != nil {
		t.Fatal(err)
	}
	del := msg(t, 1000, 1, channel, nil, nil, false)
	del.Value = []byte(`{"t":"MESSAGE_DELETE","channel_id":"100","id":"1000"}`)
	if err := s.Apply(ctx, del); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, s, bob, channel); n != 0 {
		t.Fatalf("bob has %d mentions after the @everyone was deleted", n)
	}
}

// TestDeleteLowersMentionCount: deleting a message that mentioned a user
// lowers the count it raised, once — a second copy of the delete (another
// offset) and a replay of the same offset change nothing — and a delete
// of a message the user already read past lowers nothing.
func TestDeleteLowersMentionCount(t *testing.T) {
	ctx := context.Background()
	s := newService(t, readstate.Config{}, newStore(t, ""), &visibility{}, nil)
	for i, id := range []snowflake.ID{1000, 1001} {
		if err := s.Apply(ctx, msg(t, id, int64(i), channel, []snowflake.ID{alice}, nil, false)); err != nil {
			t.Fatal(err)
		}
	}
	del := func(id snowflake.ID, off int64) {
		t.Helper()
		r := msg(t, id, off, channel, []snowflake.ID{alice}, nil, false)
		ev := eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guild, ChannelID: channel, MessageID: id,
			AuthorID: author, Mentions: []snowflake.ID{alice}}
		rec, err := ev.Record()
		if err != nil {
			t.Fatal(err)
		}
		r.Value = rec.Value
		if err := s.Apply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	del(1001, 2)
	if n := mentionCount(t, s, alice, channel); n != 1 {
		t.Fatalf("after deleting one of two mentioning messages alice has %d mentions, want 1", n)
	}
	del(1001, 3) // published twice
	del(1001, 2) // redelivered
	if n := mentionCount(t, s, alice, channel); n != 1 {
		t.Fatalf("a repeated delete lowered the count again: %d, want 1", n)
	}
	// A replayed create of the deleted message counts nothing.
	if err := s.Apply(ctx, msg(t, 1001, 1, channel, []snowflake.ID{alice}, nil, false)); err != nil {
		t.Fatal(err)
	}
	if n := mentionCount(t, s, alice, channel); n != 1 {
		t.Fatalf("a replayed create of a deleted message counted: %d, want 1", n)
	}
	if _, err := s.Ack(ctx, alice, channel, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, msg(t, 1002, 4, channel, []snowflake.ID{alice}, nil, false)); err != nil {
		t.Fatal(err)
	}
	del(1000, 5) // read already: its mention is not in the count
	if n := mentionCount(t, s, alice, channel); n != 1 {
		t.Fatalf("deleting a read message lowered the count: %d, want 1", n)
	}
	del(1002, 6)
	if n := mentionCount(t, s, alice, channel); n != 0 {
		t.Fatalf("after deleting the unread mention alice has %d, want 0", n)
	}
}
