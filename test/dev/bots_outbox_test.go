package dev

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/services/apirole"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/mention"
)

// committingStore is the platform's store, recording the events each
// message write commits with it (store.MessageEvents) before passing the
// write on: what a crash right after the write leaves for the relay.
type committingStore struct {
	store.Store
	tx store.TransactionalOutbox

	mu        sync.Mutex
	committed []eventlog.MessageEvent
}

func (s *committingStore) record(t *testing.T, evs []store.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range evs {
		ev, err := eventlog.DecodeMessageEvent(e.Value)
		if err != nil {
			t.Errorf("committed event does not decode: %v", err)
			continue
		}
		s.committed = append(s.committed, ev)
	}
}

func (s *committingStore) events() []eventlog.MessageEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.committed)
}

// refusesPublish is the log side of the test's message writer: it
// relays any store, and its separate enqueue (Publish) is the process
// dying before it: any event that goes that way is lost, and is recorded
// here.
type refusesPublish struct {
	mu        sync.Mutex
	published []eventlog.MessageEvent
}

func (r *refusesPublish) RelayStore(store.Outbox) bool { return true }

func (r *refusesPublish) Committed(int) {}

func (r *refusesPublish) Publish(_ context.Context, ev eventlog.MessageEvent) error {
	r.mu.Lock()
	r.published = append(r.published, ev)
	r.mu.Unlock()
	return errors.New("the process died before the enqueue")
}

// dropSink drops the test guild service's dispatches.
type dropSink struct{}

func (dropSink) Deliver(context.Context, string, event.Batch) {}

// TestBotMessageWritesCommitTheirEvents: every message write of the bot
// platform — an interaction response or followup (CreateMessage), an
// update of the component's message, an edit of @original or a followup
// (EditMessage), their deletion (DeleteMessage) — commits its event in
// the same store write as the message, with the mentions a REST send
// resolves (users who see the channel, @everyone for an author allowed
// it, allowed_mentions honoured); none goes through the separate enqueue
// a crash can cut off; ephemeral messages are not stored and have none.
func TestBotMessageWritesCommitTheirEvents(t *testing.T) {
	p, addr := startTestPlatform(t)
	alice, bob, g, ch := guildOfTwo(t, addr, "bot events")
	aliceID, _ := snowflake.Parse(alice.UserID)
	bobID, _ := snowflake.Parse(bob.UserID)
	guildID, _ := snowflake.Parse(g.ID)
	chID, _ := snowflake.Parse(ch.ID)

	tx, ok := p.Store().(store.TransactionalOutbox)
	if !ok {
		t.Fatalf("the dev store %T has no transactional outbox", p.Store())
	}
	cs := &committingStore{Store: p.Store(), tx: tx}
	rel := &refusesPublish{}
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A guild service of its own over the recording store, writing
	// through the outbox's Writer as the platform's does.
	rec := csStore{cs, t}
	svc, err := guild.NewService(guild.Config{}, guild.Deps{Store: rec, Sink: dropSink{}, IDs: ids,
		Messages: outbox.NewWriter(rec, rel, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	bm := apirole.NewMessages(rec, svc, ids, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	// The owner (MENTION_EVERYONE) answers, mentioning bob and everyone.
	reply, err := bm.CreateMessage(ctx, bots.NewMessage{ChannelID: chID, GuildID: guildID, AuthorID: aliceID,
		Content: "hi <@" + bob.UserID + "> @everyone", Type: bots.MessageTypeChatInputCommand})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Mentions) != 1 || reply.Mentions[0].ID != bobID || !reply.MentionEveryone {
		t.Errorf("the reply renders mentions %+v, everyone %v; want bob and everyone", reply.Mentions, reply.MentionEveryone)
	}
	edited := "now <@" + bob.UserID + "> only"
	if _, err := bm.EditMessage(ctx, bots.MessageEdit{ChannelID: chID, MessageID: reply.ID, Content: &edited}); err != nil {
		t.Fatal(err)
	}
	// allowed_mentions {parse: []} keeps the mention in the text only.
	quiet, err := bm.CreateMessage(ctx, bots.NewMessage{ChannelID: chID, GuildID: guildID, AuthorID: aliceID,
		Content: "quiet <@" + bob.UserID + ">", AllowedMentions: &mention.Allowed{Parse: &[]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	// An application that is not a member does not ping everyone.
	outsider, err := bm.CreateMessage(ctx, bots.NewMessage{ChannelID: chID, GuildID: guildID, AuthorID: 42,
		Content: "@everyone <@" + bob.UserID + ">"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bm.DeleteMessage(ctx, chID, quiet.ID, 0); err != nil {
		t.Fatal(err)
	}
	// Ephemeral: delivered to bob alone, never stored, no event.
	eph, err := bm.CreateMessage(ctx, bots.NewMessage{ChannelID: chID, GuildID: guildID, AuthorID: aliceID,
		Content: "psst <@" + bob.UserID + ">", Flags: bots.MessageFlagEphemeral, EphemeralTo: bobID})
	if err != nil {
		t.Fatal(err)
	}
	ephEdit := "psst again"
	if _, err := bm.EditMessage(ctx, bots.MessageEdit{ChannelID: chID, MessageID: eph.ID, Content: &ephEdit, EphemeralTo: bobID}); err != nil {
		t.Fatal(err)
	}
	if err := bm.DeleteMessage(ctx, chID, eph.ID, bobID); err != nil {
		t.Fatal(err)
	}

	rel.mu.Lock()
	defer rel.mu.Unlock()
	if len(rel.published) != 0 {
		t.Fatalf("%d bot message events went through the separate enqueue, not the store write: %+v", len(rel.published), rel.published)
	}
	type want struct {
		typ      string
		id       snowflake.ID
		mentions []snowflake.ID
		everyone bool
	}
	wants := []want{
		{eventlog.MessageCreate, reply.ID, []snowflake.ID{bobID}, true},
		{eventlog.MessageUpdate, reply.ID, []snowflake.ID{bobID}, false},
		{eventlog.MessageCreate, quiet.ID, nil, false},
		{eventlog.MessageCreate, outsider.ID, []snowflake.ID{bobID}, false},
		{eventlog.MessageDelete, quiet.ID, nil, false},
	}
	got := cs.events()
	if len(got) != len(wants) {
		t.Fatalf("committed events %+v, want %d (none for the ephemeral message)", got, len(wants))
	}
	for i, w := range wants {
		ev := got[i]
		if ev.Type != w.typ || ev.MessageID != w.id || ev.ChannelID != chID || ev.GuildID != guildID ||
			!slices.Equal(ev.Mentions, w.mentions) || ev.MentionEveryone != w.everyone {
			t.Errorf("committed event %d = %+v, want %s of %d mentioning %v (everyone %v)", i, ev, w.typ, w.id, w.mentions, w.everyone)
		}
		if ev.Type == eventlog.MessageCreate && ev.AuthorID == 0 {
			t.Errorf("committed create %d has no author", ev.MessageID)
		}
	}
	if _, err := p.Store().GetMessage(ctx, chID, eph.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the ephemeral message was stored: %v", err)
	}
}

// csStore gives botMessages the recording store: the platform's store
// with PutMessageEvents and DeleteMessagesEvents recorded.
type csStore struct {
	*committingStore
	t *testing.T
}

func (s csStore) PutMessageEvents(ctx context.Context, m store.Message, evs ...store.Event) error {
	if err := s.tx.PutMessageEvents(ctx, m, evs...); err != nil {
		return err
	}
	s.record(s.t, evs)
	return nil
}

func (s csStore) DeleteMessagesEvents(ctx context.Context, channelID snowflake.ID, ids []snowflake.ID, evs ...store.Event) error {
	if err := s.tx.DeleteMessagesEvents(ctx, channelID, ids, evs...); err != nil {
		return err
	}
	s.record(s.t, evs)
	return nil
}

func (s csStore) ListOutbox(ctx context.Context, shard, limit int, olderThan time.Duration) ([]store.OutboxEntry, error) {
	return s.tx.ListOutbox(ctx, shard, limit, olderThan)
}

func (s csStore) DeleteOutbox(ctx context.Context, shard int, ids [][]byte) error {
	return s.tx.DeleteOutbox(ctx, shard, ids)
}
