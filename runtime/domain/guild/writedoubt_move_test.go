package guild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// nodeService is a second guild node's Service over the fixture's store,
// writing messages through w (nil: the store itself), owning the guilds
// and private channels owns says.
func (f *fixture) nodeService(w outbox.Writer, owns func(snowflake.ID) bool) *Service {
	f.t.Helper()
	if w == nil {
		w = outbox.Unlogged(f.store)
	}
	svc, err := NewService(Config{Now: f.clock.Now, Owns: owns}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Messages: w})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { svc.Close() })
	return svc
}

// staleAfter fails the test when a message older than newest appeared in
// final without being in read, the history a reader read after newest
// was acknowledged: it appeared behind a message already read.
func staleAfter(t *testing.T, read, final []store.Message, newest store.Message) {
	t.Helper()
	if !slices.ContainsFunc(read, func(m store.Message) bool { return m.ID == newest.ID }) {
		t.Fatalf("history read after %q was acknowledged: %v", newest.Content, storedContents(read))
	}
	for _, m := range final {
		if m.ID < newest.ID && !slices.ContainsFunc(read, func(r store.Message) bool { return r.ID == m.ID }) {
			t.Fatalf("message %q (id %d) appeared behind %q (id %d) after a reader read %v: an older write of the channel was not completed before its next write",
				m.Content, m.ID, newest.Content, newest.ID, storedContents(read))
		}
	}
}

// TestWriteInDoubtSettledByNewOwner: the guild's node writes a message
// whose store write times out (in doubt: it may still apply), and the
// guild moves to another node before the write is settled — the split
// of test/faults that cuts the guild's node off. The new owner must
// complete the old owner's write in doubt before the channel's next
// write, or the old write can land behind a message a reader has read.
func TestWriteInDoubtSettledByNewOwner(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	var onA atomic.Bool
	onA.Store(true)
	w := &doubtfulWriter{Writer: outbox.Unlogged(f.store), st: f.store, content: "a",
		timeout: fmt.Errorf("transport: PutMessage on data-1: %w", context.DeadlineExceeded)}
	a := f.nodeService(w, func(snowflake.ID) bool { return onA.Load() })
	b := f.nodeService(nil, func(snowflake.ID) bool { return !onA.Load() })
	send := func(svc *Service, content string) (Written, error) {
		return svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.member.ID,
			Message:  store.Message{ChannelID: g.general.ID, AuthorID: g.member.ID, Content: content},
			Mentions: &Mentions{}, Render: render(g.member)})
	}
	w.setFailing(true)
	if _, err := send(a, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send whose write timed out: %v, want ErrUnavailable", err)
	}
	// The guild moves to node b, which has never seen it.
	onA.Store(false)
	if err := a.Unload(bg, gid); err != nil {
		t.Fatal(err)
	}
	nb, err := send(b, "b")
	if err != nil {
		t.Fatalf("the next send, on the new owner: %v", err)
	}
	read := f.history(g.general.ID)
	w.land(t) // the old owner's timed-out write applies now
	final := f.history(g.general.ID)
	staleAfter(t, read, final, nb.Message)
	if got := storedContents(final); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("final history %v, want [a b]", got)
	}
}

// dm makes a DM between the fixture guild's owner and member.
func (f *fixture) dm(svc *Service, g secretGuild) store.Channel {
	f.t.Helper()
	c, err := svc.Private.CreateDM(bg, g.owner.ID, g.member.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func sendDM(svc *Service, u store.User, ch snowflake.ID, content string) (Written, error) {
	return svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: u.ID,
		Message:  store.Message{ChannelID: ch, AuthorID: u.ID, Content: content},
		Mentions: &Mentions{}, Render: render(u)})
}

// TestPrivateWriteInDoubtSettledBeforeNextWrite: a DM's write in doubt is
// completed before the DM's next write, as a guild channel's is.
func TestPrivateWriteInDoubtSettledBeforeNextWrite(t *testing.T) {
	f, w := newDoubtFixture(t, "a", fmt.Errorf("cassandra store: put message with events: %w: write timeout", store.ErrUnavailable))
	g := f.secretGuild()
	dm := f.dm(f.svc, g)
	w.setFailing(true)
	if _, err := sendDM(f.svc, g.owner, dm.ID, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("DM send whose write timed out: %v, want ErrUnavailable", err)
	}
	w.setFailing(false)
	nb, err := sendDM(f.svc, g.member, dm.ID, "b")
	if err != nil {
		t.Fatalf("the DM's next send, with the store back: %v", err)
	}
	read := f.history(dm.ID)
	w.land(t)
	final := f.history(dm.ID)
	staleAfter(t, read, final, nb.Message)
	if got := storedContents(final); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("final history %v, want [a b]", got)
	}
}

// TestPrivateWriteInDoubtHoldsTheDM: while a DM's write in doubt cannot be
// completed, the DM's later sends are refused without being written.
func TestPrivateWriteInDoubtHoldsTheDM(t *testing.T) {
	f, w := newDoubtFixture(t, "a", fmt.Errorf("cassandra store: %w: write timeout", store.ErrUnavailable))
	g := f.secretGuild()
	dm := f.dm(f.svc, g)
	w.setFailing(true)
	if _, err := sendDM(f.svc, g.owner, dm.ID, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("DM send whose write timed out: %v, want ErrUnavailable", err)
	}
	if _, err := sendDM(f.svc, g.owner, dm.ID, "b"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("DM send behind a write in doubt that cannot complete: %v, want ErrUnavailable", err)
	}
	if w.tried("b") {
		t.Fatal("the DM send behind the write in doubt was written")
	}
	w.setFailing(false)
	if _, err := sendDM(f.svc, g.owner, dm.ID, "c"); err != nil {
		t.Fatal(err)
	}
	w.land(t)
	if got := storedContents(f.history(dm.ID)); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("history %v, want [a c]: the write in doubt once, the refused send never", got)
	}
}

// TestPrivateWriteInDoubtSettledByNewNode: a DM's write in doubt on one
// node, then the DM served by another (its ring key moved): the other
// node completes it before the DM's next write.
func TestPrivateWriteInDoubtSettledByNewNode(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	var onA atomic.Bool
	onA.Store(true)
	w := &doubtfulWriter{Writer: outbox.Unlogged(f.store), st: f.store, content: "a",
		timeout: fmt.Errorf("cassandra store: %w: write timeout", store.ErrUnavailable)}
	a := f.nodeService(w, func(snowflake.ID) bool { return onA.Load() })
	b := f.nodeService(nil, func(snowflake.ID) bool { return !onA.Load() })
	dm := f.dm(a, g)
	w.setFailing(true)
	if _, err := sendDM(a, g.owner, dm.ID, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("DM send whose write timed out: %v, want ErrUnavailable", err)
	}
	onA.Store(false)
	nb, err := sendDM(b, g.member, dm.ID, "b")
	if err != nil {
		t.Fatalf("the DM's next send, on the other node: %v", err)
	}
	read := f.history(dm.ID)
	w.land(t)
	final := f.history(dm.ID)
	staleAfter(t, read, final, nb.Message)
	if got := storedContents(final); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("final history %v, want [a b]", got)
	}
}

// gatedWriter holds the write of one content until released.
type gatedWriter struct {
	outbox.Writer
	content string
	entered chan struct{}
	release chan struct{}
}

func (w *gatedWriter) PutMessage(ctx context.Context, typ string, m store.Message) error {
	if m.Content == w.content {
		close(w.entered)
		<-w.release
	}
	return w.Writer.PutMessage(ctx, typ, m)
}

// TestPrivateWritesOneOrder: two sends to one DM at once; the first one's
// write is slow. The second must not commit ahead of it with a newer id —
// a reader would read past the first, which then appears behind — so it
// waits for its turn and gets the newer id.
func TestPrivateWritesOneOrder(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	w := &gatedWriter{Writer: outbox.Unlogged(f.store), content: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	svc := f.nodeService(w, nil)
	dm := f.dm(svc, g)
	slow := make(chan error, 1)
	go func() {
		_, err := sendDM(svc, g.owner, dm.ID, "slow")
		slow <- err
	}()
	<-w.entered // the slow write is under way
	fast := make(chan Written, 1)
	go func() {
		m, err := sendDM(svc, g.member, dm.ID, "fast")
		if err != nil {
			t.Error(err)
		}
		fast <- m
	}()
	// Read while the slow write is held: whatever is visible must not
	// later get an older message behind it.
	var read []store.Message
	select {
	case m := <-fast:
		read = f.history(dm.ID)
		close(w.release)
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
		staleAfter(t, read, f.history(dm.ID), m.Message)
	case err := <-slow:
		t.Fatalf("the slow send returned while held: %v", err)
	case <-time.After(time.Second): // the fast send is waiting for its turn, as it must; nothing to await that says so
		close(w.release)
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
		m := <-fast
		if got := storedContents(f.history(dm.ID)); !slices.Equal(got, []string{"slow", "fast"}) || m.Message.Content != "fast" {
			t.Fatalf("history %v, want [slow fast]", got)
		}
	}
}
