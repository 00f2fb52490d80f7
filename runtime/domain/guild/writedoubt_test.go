package guild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// doubtfulWriter is an outbox.Writer whose writes of one content time out
// while failing is set, as a Cassandra write does when a replica is cut
// off: the caller hears store.ErrUnavailable, yet the write is kept and
// may still apply later (land: a logged batch replayed from the batch
// log, a hint handed on), with its id.
type doubtfulWriter struct {
	outbox.Writer
	st      store.Messages
	content string
	// timeout is the error a failing write returns.
	timeout error

	mu        sync.Mutex
	failing   bool
	held      []store.Message
	attempted []string
}

func (w *doubtfulWriter) PutMessage(ctx context.Context, typ string, m store.Message) error {
	w.mu.Lock()
	w.attempted = append(w.attempted, m.Content)
	fail := w.failing && m.Content == w.content
	if fail {
		w.held = append(w.held, m)
	}
	w.mu.Unlock()
	if fail {
		return fmt.Errorf("put message %d: %w", m.ID, w.timeout)
	}
	return w.Writer.PutMessage(ctx, typ, m)
}

func (w *doubtfulWriter) setFailing(v bool) {
	w.mu.Lock()
	w.failing = v
	w.mu.Unlock()
}

// land applies the writes that timed out, as the store would later.
func (w *doubtfulWriter) land(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	for _, m := range held {
		if err := w.st.PutMessage(bg, m); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *doubtfulWriter) tried(content string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.attempted, content)
}

func newDoubtFixture(t *testing.T, content string, timeout error) (*fixture, *doubtfulWriter) {
	f := newFixture(t)
	w := &doubtfulWriter{Writer: outbox.Unlogged(f.store), st: f.store, content: content, timeout: timeout}
	svc, err := NewService(Config{Now: f.clock.Now}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Messages: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.svc = svc
	return f, w
}

func (f *fixture) trySend(u store.User, channel snowflake.ID, content string) (Written, error) {
	return f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: u.ID,
		Message:  store.Message{ChannelID: channel, AuthorID: u.ID, Content: content},
		Mentions: &Mentions{}, Render: render(u)})
}

func (f *fixture) history(channel snowflake.ID) []store.Message {
	f.t.Helper()
	ms, err := f.store.ListMessages(bg, channel, store.HistoryQuery{Limit: 100})
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Reverse(ms) // oldest first
	return ms
}

func storedContents(ms []store.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

// TestWriteInDoubtSettledBeforeNextWrite: a send whose store write timed
// out (its caller told it failed) but applies later must not appear
// behind a newer message of its channel that a reader already read — the
// STALE READ the history checker of test/faults found under a Cassandra
// split. The channel's next write completes it first, and it is fanned
// out, in id order, before the newer one. The write here goes to a data
// node and the guild node stops waiting at its bound (the transport's
// DeadlineExceeded), while the data node's write goes on.
func TestWriteInDoubtSettledBeforeNextWrite(t *testing.T) {
	f, w := newDoubtFixture(t, "a", fmt.Errorf("transport: PutMessage on data-1: %w", context.DeadlineExceeded))
	g := f.secretGuild()
	s := f.session(g.member, "a1", IntentGuilds|IntentGuildMessages|IntentMessageContent, 1)
	w.setFailing(true)
	if _, err := f.trySend(g.member, g.general.ID, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send whose write timed out: %v, want ErrUnavailable", err)
	}
	w.setFailing(false)
	b, err := f.trySend(g.member, g.general.ID, "b")
	if err != nil {
		t.Fatalf("the next send, with the store back: %v", err)
	}
	read := f.history(g.general.ID) // a reader, after b was acknowledged
	w.land(t)                       // the timed-out write applies now
	final := f.history(g.general.ID)
	if !slices.Contains(storedContents(read), "b") {
		t.Fatalf("history read after b was acknowledged: %v", storedContents(read))
	}
	for _, m := range final {
		if m.ID < b.Message.ID && !slices.ContainsFunc(read, func(r store.Message) bool { return r.ID == m.ID }) {
			t.Fatalf("message %q (id %d) appeared behind %q (id %d) after a reader read %v: the write in doubt was not settled before the channel's next write",
				m.Content, m.ID, "b", b.Message.ID, storedContents(read))
		}
	}
	if got := storedContents(final); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("final history %v, want [a b] (the write in doubt completed once, then b)", got)
	}
	ds := f.sink.waitFor(t, s.ID, "two MESSAGE_CREATE", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 2 })
	var got []string
	for _, m := range messages(t, ds) {
		got = append(got, m.Content)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("fanned out %v, want [a b]: the completed write first", got)
	}
}

// TestWriteInDoubtHoldsItsChannel: while a channel's write in doubt cannot
// be completed, the channel's later sends are refused without being
// written (a newer message must not commit ahead of it), other channels
// go on, and once the store is back the write is completed and fanned out
// without waiting for another send. The store itself times out here
// (Cassandra's write timeout: store.ErrUnavailable).
func TestWriteInDoubtHoldsItsChannel(t *testing.T) {
	f, w := newDoubtFixture(t, "a", fmt.Errorf("cassandra store: put message with events: %w: write timeout", store.ErrUnavailable))
	g := f.secretGuild()
	s := f.session(g.owner, "o1", IntentGuilds|IntentGuildMessages|IntentMessageContent, 1)
	w.setFailing(true)
	if _, err := f.trySend(g.owner, g.general.ID, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send whose write timed out: %v, want ErrUnavailable", err)
	}
	if _, err := f.trySend(g.owner, g.general.ID, "b"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send behind a write in doubt that cannot complete: %v, want ErrUnavailable", err)
	}
	if w.tried("b") {
		t.Fatal("the send behind the write in doubt was written")
	}
	if _, err := f.trySend(g.owner, g.secret.ID, "other"); err != nil {
		t.Fatalf("a send to another channel: %v", err)
	}
	w.setFailing(false)
	// The background retry completes and fans out "a" with no other send.
	f.sink.waitFor(t, s.ID, "the completed write's MESSAGE_CREATE", func(ds []delivered) bool {
		return slices.ContainsFunc(messages(t, ds), func(m wire.Message) bool { return m.Content == "a" })
	})
	if _, err := f.trySend(g.owner, g.general.ID, "c"); err != nil {
		t.Fatal(err)
	}
	w.land(t)
	if got := storedContents(f.history(g.general.ID)); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("history %v, want [a c]: the write in doubt once, the refused send never", got)
	}
}
