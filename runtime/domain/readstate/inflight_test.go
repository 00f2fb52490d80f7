package readstate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// loadGateStore is a gateStore that also lets a test run code between a
// load's read of the store and its return.
type loadGateStore struct {
	*gateStore
	afterLoad func(user snowflake.ID) // runs after LoadUser read the store
	// afterLoadChannel runs after LoadChannel read the store.
	afterLoadChannel func(channel snowflake.ID)
}

func newLoadGateStore(t *testing.T) *loadGateStore {
	return &loadGateStore{gateStore: &gateStore{countingStore: newStore(t, "")}}
}

func (g *loadGateStore) LoadChannel(ctx context.Context, channel snowflake.ID) (readstate.ChannelRecord, bool, error) {
	rec, ok, err := g.countingStore.LoadChannel(ctx, channel)
	if f := g.afterLoadChannel; f != nil {
		f(channel)
	}
	return rec, ok, err
}

func (g *loadGateStore) LoadUser(ctx context.Context, user snowflake.ID) ([]readstate.Record, error) {
	recs, err := g.countingStore.LoadUser(ctx, user)
	if f := g.afterLoad; f != nil {
		f(user)
	}
	return recs, err
}

// TestLoadDuringWrite evicts a user whose record is being written (the
// write took a clean copy, so the entry may go) and loads the user again
// while that write runs; the write lands after the load read the store
// but before the load returns. The loaded entry still has the written
// mention: a load that read the store before the write landed, and the
// writes in flight after it had ended, lost it, and the next mention
// overwrote the record without it (TestRebalanceNoDoubleCount caught one
// in a few hundred runs).
func TestLoadDuringWrite(t *testing.T) {
	ctx := context.Background()
	st := newLoadGateStore(t)
	// One cached user: loading another evicts a clean one.
	s := newService(t, readstate.Config{Users: 1, Shards: 1}, st, &visibility{}, nil)
	add := func(user snowflake.ID, msg snowflake.ID, off int64) error {
		return s.AddMentions(ctx, []readstate.Mention{{User: user, Channel: channel, Message: msg, Offset: off}})
	}
	if err := add(alice, 1001, 1); err != nil {
		t.Fatal(err)
	}

	// Alice's second mention: its write is held with the copy taken.
	st.hold()
	aliceDone := make(chan error, 1)
	go func() { aliceDone <- add(alice, 1002, 2) }()
	// Bob's mention loads bob, which evicts alice (clean once taken); it
	// then waits behind alice's write.
	<-st.entered
	bobDone := make(chan error, 1)
	go func() { bobDone <- add(bob, 1003, 3) }()
	awaitPending(t, s, 1)

	// Alice is loaded again; between the load's read of the store and
	// its return, her write lands and ends.
	st.afterLoad = func(user snowflake.ID) {
		if user != alice {
			return
		}
		st.afterLoad = nil
		close(st.gate)
		if err := <-aliceDone; err != nil {
			t.Error(err)
		}
	}
	got, err := s.ChannelState(ctx, alice, channel)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-bobDone; err != nil {
		t.Fatal(err)
	}
	if got.MentionCount != 2 {
		t.Fatalf("alice reloaded during her record's write: %d mentions, want 2", got.MentionCount)
	}
}

// TestChannelLoadDuringFlush is TestLoadDuringWrite for a channel's
// record: evicted while a flush writes it, and loaded again as the write
// lands. The loaded record still has the @everyone the flush wrote.
func TestChannelLoadDuringFlush(t *testing.T) {
	ctx := context.Background()
	st := newLoadGateStore(t)
	s := newService(t, readstate.Config{Channels: 1, Shards: 1}, st, &visibility{}, nil)
	other := channel + 1
	if err := s.Apply(ctx, msg(t, 2001, 0, channel, nil, nil, true)); err != nil {
		t.Fatal(err)
	}
	st.hold()
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush(ctx) }()
	<-st.entered
	// Another channel's event evicts the first channel's record, clean
	// since the flush took it.
	if err := s.Apply(ctx, msg(t, 2002, 1, other, nil, nil, false)); err != nil {
		t.Fatal(err)
	}
	st.afterLoadChannel = func(ch snowflake.ID) {
		if ch != channel {
			return
		}
		st.afterLoadChannel = nil
		close(st.gate)
		if err := <-flushed; err != nil {
			t.Error(err)
		}
	}
	if err := s.Apply(ctx, msg(t, 2003, 2, channel, nil, nil, true)); err != nil {
		t.Fatal(err)
	}
	got, err := s.ChannelState(ctx, alice, channel)
	if err != nil {
		t.Fatal(err)
	}
	if got.MentionCount != 2 {
		t.Fatalf("channel reloaded during its flush: alice has %d @everyone mentions, want 2", got.MentionCount)
	}
}

// TestFencedWriteInFlightDuringReload: a replica's write of alice is held
// when another replica claims her (epoch 2) and counts a mention; the ring
// moves back (epoch 3), the first replica evicts alice and loads her again
// while its old write is still held, and counts one more. The held write is
// then fenced. The reloaded record keeps the other replica's mention (the
// held copy, at an epoch the store no longer has, is not taken as newer),
// and the fenced write's clean-up leaves the reloaded entry, with its
// change waiting to be written, alone.
func TestFencedWriteInFlightDuringReload(t *testing.T) {
	ctx := context.Background()
	st := newLoadGateStore(t)
	ownA, ownB := &owner{epoch: 1, owns: true}, &owner{epoch: 2, owns: true}
	a := newService(t, readstate.Config{Owns: ownA.fn, Users: 1, Shards: 1}, st, &visibility{}, nil)
	b := newService(t, readstate.Config{Owns: ownB.fn}, st, &visibility{}, nil)
	mention := func(s *readstate.Service, user, msg snowflake.ID, off int64) error {
		return s.AddMentions(ctx, []readstate.Mention{{User: user, Channel: channel, Message: msg, Offset: off}})
	}
	if err := mention(a, alice, 1, 1); err != nil {
		t.Fatal(err)
	}
	st.hold()
	errs := make(chan error, 3)
	go func() { errs <- mention(a, alice, 2, 2) }()
	<-st.entered
	if err := mention(b, alice, 3, 3); err != nil { // claims alice at 2
		t.Fatal(err)
	}
	ownA.set(3, true)
	ownB.set(0, false)
	go func() { errs <- mention(a, bob, 5, 5) }() // evicts alice
	awaitPending(t, a, 1)
	go func() { errs <- mention(a, alice, 4, 4) }() // reloads her at 3
	awaitPending(t, a, 2)
	close(st.gate)
	for range 3 {
		if err := <-errs; err != nil && !errors.Is(err, readstate.ErrNotOwner) {
			t.Fatal(err)
		}
	}
	recs, err := st.LoadUser(ctx, alice)
	if err != nil || len(recs) != 1 {
		t.Fatalf("alice's records %+v, %v", recs, err)
	}
	for _, m := range []snowflake.ID{1, 3, 4} {
		if !slices.Contains(recs[0].Mentions, m) {
			t.Errorf("alice's record counts %v, without message %d", recs[0].Mentions, m)
		}
	}
}

// awaitPending waits until n records wait in s's open group commit.
func awaitPending(t *testing.T, s *readstate.Service, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for readstate.PendingCommit(s) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d records wait for the commit after 30s, want %d", readstate.PendingCommit(s), n)
		}
		time.Sleep(time.Millisecond) // polling a state: joining has no event
	}
}
