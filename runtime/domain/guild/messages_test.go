package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// actorSteps counts the operations the service's actors ran: every
// operation is one observation of concord_guild_event_age_seconds (its
// time in the mailbox), whichever method queued it.
func actorSteps(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "concord_guild_event_age_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no concord_guild_event_age_seconds")
	return 0
}

// recordingWriter is an outbox.Writer over the store that records, in
// order, the messages it wrote.
type recordingWriter struct {
	outbox.Writer
	writes chan store.Message
}

func (w recordingWriter) PutMessage(ctx context.Context, typ string, m store.Message) error {
	if err := w.Writer.PutMessage(ctx, typ, m); err != nil {
		return err
	}
	w.writes <- m
	return nil
}

// render is a Render for tests: the stored message with its author.
func render(author store.User) func(context.Context, Written) (wire.Message, error) {
	return func(_ context.Context, w Written) (wire.Message, error) {
		return wire.MessageFrom(w.Message, wire.UserFrom(author), w.Member, nil, nil), nil
	}
}

// TestSendEntersTheActorOnce: a member's send — the check (permissions,
// slowmode), the id, the write with its event, the fan-out — is one step
// of the guild's actor: the write path does not come back to the actor
// after the store write. The message is stored before its MESSAGE_CREATE
// leaves, with the mentions the check allowed, and the slowmode clock the
// step started refuses the next send.
func TestSendEntersTheActorOnce(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	rec := recordingWriter{Writer: outbox.Unlogged(f.store), writes: make(chan store.Message, 4)}
	svc, err := NewService(Config{Now: f.clock.Now, Registerer: reg}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Messages: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.svc = svc
	g := f.secretGuild()
	slow := 60
	if _, err := f.svc.Channels.Modify(bg, g.owner.ID, g.general.ID, ChannelPatch{RateLimitPerUser: &slow}); err != nil {
		t.Fatal(err)
	}
	s := f.session(g.member, "a1", IntentGuilds|IntentGuildMessages|IntentMessageContent, 1)

	before := actorSteps(t, reg)
	w, err := f.svc.Messages.Create(bg, MessageWrite{
		Check: CheckSend, UserID: g.member.ID,
		Message:  store.Message{ChannelID: g.general.ID, AuthorID: g.member.ID, Content: "hi <@" + g.owner.ID.String() + ">"},
		Mentions: &Mentions{Users: []snowflake.ID{g.owner.ID, 12345}},
		Render:   render(g.member),
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := actorSteps(t, reg) - before; n != 1 {
		t.Fatalf("the send entered the guild's actor %d times, want 1", n)
	}
	stored := <-rec.writes
	if stored.ID == 0 || stored.ID != w.Message.ID || stored.GuildID != g.guild.Guild.ID {
		t.Fatalf("stored %+v, answered %+v", stored, w.Message)
	}
	if len(stored.Mentions) != 1 || stored.Mentions[0] != g.owner.ID {
		t.Errorf("stored mentions %v, want only the member who sees the channel (%d)", stored.Mentions, g.owner.ID)
	}
	if w.Member == nil || w.Wire.ID != stored.ID {
		t.Errorf("written %+v: want the author's member and the rendered message", w)
	}
	got := f.sink.waitFor(t, s.ID, "MESSAGE_CREATE", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	if m := messages(t, got); m[0].ID != stored.ID {
		t.Errorf("fanned out %d, stored %d", m[0].ID, stored.ID)
	}

	// The clock the step started refuses the next send, in one step too,
	// and nothing is written.
	before = actorSteps(t, reg)
	_, err = f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.member.ID,
		Message: store.Message{ChannelID: g.general.ID, AuthorID: g.member.ID, Content: "again"}, Mentions: &Mentions{}, Render: render(g.member)})
	var slowErr *SlowmodeError
	if !errors.As(err, &slowErr) || slowErr.RetryAfter <= 0 {
		t.Fatalf("second send: %v, want a slowmode refusal", err)
	}
	if n := actorSteps(t, reg) - before; n != 1 {
		t.Fatalf("the refused send entered the actor %d times, want 1", n)
	}
	select {
	case m := <-rec.writes:
		t.Fatalf("the refused send wrote %+v", m)
	default:
	}
}

// TestEditAndDeleteEnterTheActorOnce: an edit (new mentions checked) and
// a deletion (MANAGE_MESSAGES for another's message) are one actor step
// each; a member without MANAGE_MESSAGES cannot delete another's message,
// and a message of an archived thread is neither edited nor deleted.
func TestEditAndDeleteEnterTheActorOnce(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	f.svc = f.newService(Config{Registerer: reg})
	g := f.secretGuild()
	s := f.session(g.owner, "a1", IntentGuilds|IntentGuildMessages|IntentMessageContent, 1)
	w := must[Written](t)(f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
		Message: store.Message{ChannelID: g.general.ID, AuthorID: g.owner.ID, Content: "first"}, Mentions: &Mentions{}, Render: render(g.owner)}))

	m := w.Message
	m.Content = "edited"
	before := actorSteps(t, reg)
	if _, err := f.svc.Messages.Update(bg, MessageWrite{Check: CheckEdit, UserID: g.owner.ID, Message: m, Mentions: &Mentions{}, Render: render(g.owner)}); err != nil {
		t.Fatal(err)
	}
	if n := actorSteps(t, reg) - before; n != 1 {
		t.Fatalf("the edit entered the actor %d times, want 1", n)
	}
	if got := must[store.Message](t)(f.store.GetMessage(bg, m.ChannelID, m.ID)); got.Content != "edited" {
		t.Fatalf("stored content %q after the edit", got.Content)
	}
	f.sink.waitFor(t, s.ID, "MESSAGE_UPDATE", func(ds []delivered) bool { return count(ds, "MESSAGE_UPDATE") == 1 })

	err := f.svc.Messages.Delete(bg, MessageDelete{ChannelID: m.ChannelID, Messages: []store.Message{m}, UserID: g.member.ID, ManageMessages: true})
	if !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("a member's delete of the owner's message: %v, want ErrMissingPermissions", err)
	}
	before = actorSteps(t, reg)
	if err := f.svc.Messages.Delete(bg, MessageDelete{ChannelID: m.ChannelID, Messages: []store.Message{m}, UserID: g.owner.ID}); err != nil {
		t.Fatal(err)
	}
	if n := actorSteps(t, reg) - before; n != 1 {
		t.Fatalf("the delete entered the actor %d times, want 1", n)
	}
	if _, err := f.store.GetMessage(bg, m.ChannelID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted message is still stored: %v", err)
	}
	got := f.sink.waitFor(t, s.ID, "MESSAGE_DELETE", func(ds []delivered) bool { return count(ds, "MESSAGE_DELETE") == 1 })
	var del wire.MessageDelete
	for _, d := range got {
		if d.Type == "MESSAGE_DELETE" {
			if err := json.Unmarshal(d.Payload, &del); err != nil {
				t.Fatal(err)
			}
		}
	}
	if del.ID != m.ID || del.ChannelID != m.ChannelID {
		t.Errorf("MESSAGE_DELETE %+v, want %d in %d", del, m.ID, m.ChannelID)
	}
}

// TestWriteOutlivesItsCaller: a caller that hangs up once the actor took
// its send still gets the send's outcome, and the message is stored once:
// a caller told "failed" while the write went on would send it again.
func TestWriteOutlivesItsCaller(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	ctx, cancel := context.WithCancel(bg)
	var w Written
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		w, err = f.svc.Messages.Create(ctx, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
			Message: store.Message{ChannelID: g.general.ID, AuthorID: g.owner.ID, Content: "kept"}, Mentions: &Mentions{},
			Render: func(c context.Context, w Written) (wire.Message, error) {
				cancel() // the caller hangs up while the actor renders
				return render(g.owner)(c, w)
			}})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CreateMessage did not return")
	}
	if err != nil {
		t.Fatalf("a send the actor completed reported %v", err)
	}
	if _, err := f.store.GetMessage(bg, g.general.ID, w.Message.ID); err != nil {
		t.Fatalf("the message is not stored: %v", err)
	}
}

// TestWriteEventCommittedWithMessage: through the outbox's Writer on a
// store with a transactional outbox, a send's MESSAGE_CREATE is in the
// store's outbox when CreateMessage returns, with the mentions the check
// allowed.
func TestWriteEventCommittedWithMessage(t *testing.T) {
	f := newFixture(t)
	svc, err := NewService(Config{Now: f.clock.Now}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth,
		Messages: outbox.NewWriter(f.store, holdingRelay{}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.svc = svc
	g := f.secretGuild()
	w := must[Written](t)(f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
		Message:  store.Message{ChannelID: g.secret.ID, AuthorID: g.owner.ID, Content: "psst"},
		Mentions: &Mentions{Users: []snowflake.ID{g.member.ID}}, Render: render(g.owner)}))
	es := must[[]store.OutboxEntry](t)(f.store.ListOutbox(bg, store.OutboxShard(g.secret.ID), 10, 0))
	if len(es) != 1 {
		t.Fatalf("outbox holds %d entries, want the send's event", len(es))
	}
	ev, err := eventlog.DecodeMessageEvent(es[0].Event.Value)
	if err != nil {
		t.Fatal(err)
	}
	// The member does not see #secret: the mention is not stored, nor in
	// the event the read states count.
	if ev.Type != eventlog.MessageCreate || ev.MessageID != w.Message.ID || len(ev.Mentions) != 0 {
		t.Fatalf("committed %+v, want MESSAGE_CREATE of %d without mentions", ev, w.Message.ID)
	}
}

// holdingRelay relays any store and publishes nothing: the committed
// events stay in the store's outbox for the test to read.
type holdingRelay struct{}

func (holdingRelay) Publish(context.Context, eventlog.MessageEvent) error {
	return errors.New("no separate enqueue in this test")
}
func (holdingRelay) RelayStore(store.Outbox) bool { return true }
func (holdingRelay) Committed(int)                {}

var _ outbox.Relay = holdingRelay{}

// TestConcurrentSendsKeepTheActorsOrder: sends that queue up behind one
// another are committed together (writebatch.go) and still each take one
// actor step, are all stored, and reach a session in the order of their
// ids, which is the order the actor took them.
func TestConcurrentSendsKeepTheActorsOrder(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	f.svc = f.newService(Config{Registerer: reg})
	g := f.secretGuild()
	s := f.session(g.member, "a1", IntentGuilds|IntentGuildMessages|IntentMessageContent, 1)
	const n = 40
	before := actorSteps(t, reg)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
				Message:  store.Message{ChannelID: g.general.ID, AuthorID: g.owner.ID, Content: fmt.Sprint(i)},
				Mentions: &Mentions{}, Render: render(g.owner)})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if steps := actorSteps(t, reg) - before; steps != n {
		t.Fatalf("%d sends took %d actor steps, want one each", n, steps)
	}
	got := messages(t, f.sink.waitFor(t, s.ID, "every MESSAGE_CREATE", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == n }))
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Fatalf("message %d (%d) reached the session after %d: not in the actor's order", i, got[i].ID, got[i-1].ID)
		}
	}
	for _, m := range got {
		if _, err := f.store.GetMessage(bg, g.general.ID, m.ID); err != nil {
			t.Fatalf("fanned-out message %d is not stored: %v", m.ID, err)
		}
	}
}
