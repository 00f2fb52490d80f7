package readstate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// gateStore counts writes and, once hold has armed it, holds the next
// Write until its gate is opened.
type gateStore struct {
	*countingStore
	armed   atomic.Bool
	entered chan struct{} // closed when the held write arrives
	gate    chan struct{} // closed: the held write goes on
}

// hold arms g for the next Write.
func (g *gateStore) hold() {
	g.entered, g.gate = make(chan struct{}), make(chan struct{})
	g.armed.Store(true)
}

func (g *gateStore) Write(ctx context.Context, u []readstate.Record, ch []readstate.ChannelRecord) error {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.gate
	}
	return g.countingStore.Write(ctx, u, ch)
}

// TestAckGroupCommit: an ack is answered only once it is in the table (a
// cold service on the same table sees it without any flush), and the acks
// that arrive while one write runs go out together in the next: eight
// acks behind a held write cost two writes, not nine.
func TestAckGroupCommit(t *testing.T) {
	ctx := context.Background()
	st := &gateStore{countingStore: newStore(t, "")}
	st.hold()
	s := newService(t, readstate.Config{}, st, &visibility{}, nil)

	first := make(chan error, 1)
	go func() {
		_, err := s.Ack(ctx, alice, channel, 500)
		first <- err
	}()
	select { // the first ack's write is running
	case <-st.entered:
	case err := <-first:
		t.Fatalf("the first ack was answered (%v) without a store write", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first ack wrote nothing in 30s")
	}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.Ack(ctx, snowflake.ID(1000+i), channel, snowflake.ID(600+i))
			errs <- err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for readstate.PendingCommit(s) < n {
		select {
		case err := <-first:
			t.Fatalf("the first ack was answered (%v) while its write was held", err)
		case err := <-errs:
			t.Fatalf("an ack was answered (%v) while the write before it was held", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acks joined the next commit after 30s, want %d", readstate.PendingCommit(s), n)
		}
		time.Sleep(time.Millisecond) // polling a state: joining has no event
	}
	close(st.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if w := st.writes.Load(); w != 2 {
		t.Fatalf("%d store writes for 1+%d acks, want 2 (the held one, then one group commit)", w, n)
	}
	cold := newService(t, readstate.Config{}, st.countingStore.Store, &visibility{}, nil)
	for i := range n {
		states, err := cold.States(ctx, snowflake.ID(1000+i), []snowflake.ID{channel})
		if err != nil {
			t.Fatal(err)
		}
		if len(states) != 1 || states[0].LastReadID != snowflake.ID(600+i) {
			t.Fatalf("user %d in the table: %+v, want marker %d (answered, so written)", 1000+i, states, 600+i)
		}
	}
}

// owner is a Config.Owns whose epoch a test moves.
type owner struct {
	mu    sync.Mutex
	epoch int64
	owns  bool
}

func (o *owner) set(epoch int64, owns bool) {
	o.mu.Lock()
	o.epoch, o.owns = epoch, owns
	o.mu.Unlock()
}

func (o *owner) fn(snowflake.ID) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epoch, o.owns
}

// TestStaleOwnerFenced: two replicas briefly both believe they own alice
// (the old owner at ring revision 1, the new at 2). The new owner's first
// change claims her at 2 and loads, and so keeps the old owner's last
// ack. After the claim the old owner can
// change nothing: its ack fails with ErrNotOwner (the caller retries on
// the owner) and its flush of what it still holds writes nothing over the
// new owner's records.
func TestStaleOwnerFenced(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, "")
	oldOwner, newOwner := &owner{epoch: 1, owns: true}, &owner{epoch: 2, owns: true}
	a := newService(t, readstate.Config{Owns: oldOwner.fn}, st, &visibility{}, nil)
	b := newService(t, readstate.Config{Owns: newOwner.fn}, st, &visibility{}, nil)

	if _, err := a.Ack(ctx, alice, channel, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Ack(ctx, alice, channel, 200); err != nil {
		t.Fatal(err)
	}
	// b's first change: a mention after both acks.
	if err := b.AddMentions(ctx, []readstate.Mention{{User: alice, Channel: channel, Message: 300, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	if st, err := b.ChannelState(ctx, alice, channel); err != nil || st.LastReadID != 200 || st.MentionCount != 1 {
		t.Fatalf("new owner's state %+v, %v; want the old owner's last ack (200) kept and 1 mention", st, err)
	}
	// The old owner still believes it owns alice.
	if _, err := a.Ack(ctx, alice, channel, 250); !errors.Is(err, readstate.ErrNotOwner) {
		t.Fatalf("old owner's ack after the new owner's claim = %v, want ErrNotOwner", err)
	}
	if err := a.AddMentions(ctx, []readstate.Mention{{User: alice, Channel: channel, Message: 400, Offset: 9}}); !errors.Is(err, readstate.ErrNotOwner) {
		t.Fatalf("old owner's mention after the new owner's claim = %v, want ErrNotOwner", err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cold := newService(t, readstate.Config{}, st, &visibility{}, nil)
	got, err := cold.ChannelState(ctx, alice, channel)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastReadID != 200 || got.MentionCount != 1 {
		t.Fatalf("table holds %+v, want the new owner's record (marker 200, 1 mention)", got)
	}
	// The ring moves back to a at a later revision: a claims again,
	// reloads, and its ack lands on top of b's record.
	oldOwner.set(3, true)
	newOwner.set(0, false)
	if _, err := b.Ack(ctx, alice, channel, 260); !errors.Is(err, readstate.ErrNotOwner) {
		t.Fatalf("ack on a replica that does not own the user = %v, want ErrNotOwner", err)
	}
	if _, err := a.Ack(ctx, alice, channel, 350); err != nil {
		t.Fatalf("ack on the owner at revision 3: %v", err)
	}
	if got, err := newService(t, readstate.Config{}, st, &visibility{}, nil).ChannelState(ctx, alice, channel); err != nil || got.LastReadID != 350 {
		t.Fatalf("table holds %+v, %v; want marker 350", got, err)
	}
}

// del builds a MESSAGE_DELETE of id at off carrying the mentions the
// message was stored with.
func del(t testing.TB, id snowflake.ID, off int64, mentions ...snowflake.ID) eventlog.Record {
	ev := eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guild, ChannelID: channel, MessageID: id,
		AuthorID: author, Mentions: mentions}
	r, err := ev.Record()
	if err != nil {
		t.Fatal(err)
	}
	r.Offset = off
	return r
}

// TestDeleteOlderThanWindow: a message far older than the channel's window
// of remembered ids still lowers the count of the users it mentioned when
// deleted, once: a second copy of the delete and a replay of the whole
// partition change nothing, and a cold service on the table agrees.
func TestDeleteOlderThanWindow(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, "")
	s := newService(t, readstate.Config{SeenPerChannel: 4}, st, &visibility{}, nil)
	var log []eventlog.Record
	apply := func(r eventlog.Record) {
		t.Helper()
		log = append(log, r)
		if err := s.Apply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	apply(msg(t, 1000, 0, channel, []snowflake.ID{alice, bob}, nil, false))
	apply(msg(t, 1001, 1, channel, []snowflake.ID{alice}, nil, false))
	for i := range 20 { // pushes 1000 and 1001 out of the window
		apply(msg(t, snowflake.ID(2000+i), int64(2+i), channel, nil, nil, false))
	}
	apply(del(t, 1000, 22, alice, bob))
	if a, b := mentionCount(t, s, alice, channel), mentionCount(t, s, bob, channel); a != 1 || b != 0 {
		t.Fatalf("after deleting an old mention: alice %d, bob %d; want 1 and 0", a, b)
	}
	apply(del(t, 1000, 23, alice, bob)) // the outbox published it twice
	for _, r := range log {             // the partition redelivered from the start
		if err := s.Apply(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cold := newService(t, readstate.Config{}, st, &visibility{}, nil)
	for _, svc := range []*readstate.Service{s, cold} {
		if a, b := mentionCount(t, svc, alice, channel), mentionCount(t, svc, bob, channel); a != 1 || b != 0 {
			t.Fatalf("after a second delete and a replay: alice %d, bob %d; want 1 and 0", a, b)
		}
	}
}

// TestOwnerReadsWhatAnEarlierOwnerWrote: an owner's read serves the
// records at its own epoch. The chaos suite lost a mention this way: a
// node whose view of the ring went from owning a user to owning the user
// again without seeing the revision in between (or that loaded the user
// for a read while the previous owner still wrote) served its cached copy
// to READY, without the mention the other owner had counted meanwhile,
// until the user's next change reloaded it, which at the end of traffic
// never came.
func TestOwnerReadsWhatAnEarlierOwnerWrote(t *testing.T) {
	ctx := context.Background()
	st := newStore(t, "")
	ownA, ownB := &owner{epoch: 1, owns: true}, &owner{epoch: 2, owns: true}
	a := newService(t, readstate.Config{Owns: ownA.fn}, st, &visibility{}, nil)
	b := newService(t, readstate.Config{Owns: ownB.fn}, st, &visibility{}, nil)
	count := func(svc *readstate.Service) int {
		t.Helper()
		s, err := svc.ChannelState(ctx, alice, channel)
		if err != nil {
			t.Fatal(err)
		}
		return s.MentionCount
	}
	// add hands a mention to a; when a is fenced, to b, as the mention
	// router retries on the ring's owner.
	add := func(m readstate.Mention) {
		t.Helper()
		err := a.AddMentions(ctx, []readstate.Mention{m})
		if errors.Is(err, readstate.ErrNotOwner) {
			err = b.AddMentions(ctx, []readstate.Mention{m})
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	if err := a.AddMentions(ctx, []readstate.Mention{{User: alice, Channel: channel, Message: 300, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	// b (revision 2) reads while a (still at revision 1) is counting.
	if n := count(b); n != 1 {
		t.Fatalf("new owner reads %d mentions, want 1", n)
	}
	add(readstate.Mention{User: alice, Channel: channel, Message: 301, Offset: 2})
	if n := count(b); n != 2 {
		t.Fatalf("new owner reads %d mentions after the old owner's last hand-off, want 2", n)
	}

	// The ring moves alice to a (revision 3) and back to b (revision 4);
	// b never releases her, so it still holds her at revision 2.
	ownA.set(3, true)
	ownB.set(0, false)
	if err := a.AddMentions(ctx, []readstate.Mention{{User: alice, Channel: channel, Message: 302, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ChannelState(ctx, alice, channel); !errors.Is(err, readstate.ErrNotOwner) {
		t.Fatalf("read on a service that does not own the user = %v, want ErrNotOwner", err)
	}
	ownA.set(0, false)
	ownB.set(4, true)
	if n := count(b); n != 3 {
		t.Fatalf("owner back at revision 4 reads %d mentions, want 3 (the one counted at revision 3)", n)
	}
}
