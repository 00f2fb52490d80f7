package readstate_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// loadGateStore holds the next write until released, and lets a test run
// code between a load's read of the store and its return.
type loadGateStore struct {
	readstate.Store
	holdNext  atomic.Bool             // hold the next write
	held      chan struct{}           // closed when it is held
	writeGate chan struct{}           // closed: the held write goes on
	afterLoad func(user snowflake.ID) // runs after LoadUser read the store
	// afterLoadChannel runs after LoadChannel read the store.
	afterLoadChannel func(channel snowflake.ID)
}

func (g *loadGateStore) LoadChannel(ctx context.Context, channel snowflake.ID) (readstate.ChannelRecord, bool, error) {
	rec, ok, err := g.Store.LoadChannel(ctx, channel)
	if f := g.afterLoadChannel; f != nil {
		f(channel)
	}
	return rec, ok, err
}

func (g *loadGateStore) Write(ctx context.Context, u []readstate.Record, ch []readstate.ChannelRecord) error {
	if g.holdNext.CompareAndSwap(true, false) {
		close(g.held)
		<-g.writeGate
	}
	return g.Store.Write(ctx, u, ch)
}

func (g *loadGateStore) LoadUser(ctx context.Context, user snowflake.ID) ([]readstate.Record, error) {
	recs, err := g.Store.LoadUser(ctx, user)
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
	st := &loadGateStore{Store: newStore(t, "")}
	// One cached user: loading another evicts a clean one.
	s := newService(t, readstate.Config{Users: 1, Shards: 1}, st, &visibility{}, nil)
	add := func(user snowflake.ID, msg snowflake.ID, off int64) error {
		return s.AddMentions(ctx, []readstate.Mention{{User: user, Channel: channel, Message: msg, Offset: off}})
	}
	if err := add(alice, 1001, 1); err != nil {
		t.Fatal(err)
	}

	// Alice's second mention: its write is held with the copy taken.
	st.held, st.writeGate = make(chan struct{}), make(chan struct{})
	st.holdNext.Store(true)
	aliceDone := make(chan error, 1)
	go func() { aliceDone <- add(alice, 1002, 2) }()
	// Bob's mention loads bob, which evicts alice (clean once taken); it
	// then waits behind alice's write.
	<-st.held
	bobDone := make(chan error, 1)
	go func() { bobDone <- add(bob, 1003, 3) }()
	deadline := time.Now().Add(30 * time.Second)
	for readstate.PendingCommit(s) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("bob's mention did not join the commit after alice's in 30s")
		}
		time.Sleep(time.Millisecond) // polling a state: joining has no event
	}

	// Alice is loaded again; between the load's read of the store and
	// its return, her write lands and ends.
	st.afterLoad = func(user snowflake.ID) {
		if user != alice {
			return
		}
		st.afterLoad = nil
		close(st.writeGate)
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
	st := &loadGateStore{Store: newStore(t, "")}
	s := newService(t, readstate.Config{Channels: 1, Shards: 1}, st, &visibility{}, nil)
	other := channel + 1
	if err := s.Apply(ctx, msg(t, 2001, 0, channel, nil, nil, true)); err != nil {
		t.Fatal(err)
	}
	st.held, st.writeGate = make(chan struct{}), make(chan struct{})
	st.holdNext.Store(true)
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush(ctx) }()
	<-st.held
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
		close(st.writeGate)
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
