package outbox

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Writer writes message changes together with the events that describe
// them for the durable log (eventlog.MessagesTopic), which mention
// counting consumes. The guild service writes every message change of the
// process through one Writer, chosen once when the process is put
// together (NewWriter); nothing downstream asks which kind it got.
//
// What every method promises:
//   - Durable: when it returns nil the change is durable in the store and
//     so is its event — committed in the same atomic store write on the
//     transactional path, or queued in the process's synced local queue
//     right after the store write on the queued path.
//   - Lost: nothing on the transactional path. On the queued path a crash
//     between the store write and the queue write loses the event (never
//     the message: history is the source of truth); a queue write that
//     fails is logged, not returned, because the change is already stored.
//     Without a log (Unlogged) there are no events to lose.
//   - Errors: an error means the change may or may not be stored. The
//     methods are idempotent for the same arguments, so a retry completes
//     a half-done first attempt; its event may then reach the log twice,
//     which consumers dedupe by message id.
//   - Ordering: the events of one channel reach the log in the order their
//     writes returned (one outbox shard, or one queue, per channel), and a
//     write's event is never in the log before the write returned. Writes
//     that run concurrently are ordered by no one: callers that need an
//     order (the guild actor) make them one after the other.
type Writer interface {
	// PutMessage stores m (a create or an overwrite of the message with
	// m's id) with its typ event, typ being eventlog.MessageCreate or
	// eventlog.MessageUpdate; the event carries the mentions m is stored
	// with (StoredEvent).
	PutMessage(ctx context.Context, typ string, m store.Message) error
	// DeleteMessage deletes m, a stored message just read, with its
	// MESSAGE_DELETE. On the transactional path deleting a message that a
	// concurrent delete removed first succeeds (and logs a duplicate
	// event); otherwise that is store.ErrNotFound.
	DeleteMessage(ctx context.Context, guildID snowflake.ID, m store.Message) error
	// DeleteMessages deletes msgs, stored messages of one channel just
	// read, with one MESSAGE_DELETE each, carrying the mentions the message
	// was stored with so that the consumer lowers the counts it raised.
	// Ids already gone are not an error.
	DeleteMessages(ctx context.Context, guildID, channelID snowflake.ID, msgs []store.Message) error
}

// Relay is the log side of a Writer: *Outbox implements it. Publish
// queues one event in the local synced queue (the queued path);
// RelayStore starts relaying a store's transactional outbox and Committed
// wakes that relay for a shard just written (the transactional path).
type Relay interface {
	eventlog.Publisher
	RelayStore(src store.Outbox) bool
	Committed(shard int)
}

var _ Relay = (*Outbox)(nil)

// NewWriter returns the Writer of st's message changes for r's log, and
// starts r relaying st's outbox when it can: transactional when st
// commits events in its message writes (store.TransactionalOutbox) and r
// relays that store, else queued through r.Publish after each store
// write. A nil r writes without events (Unlogged). The choice is made here,
// once.
func NewWriter(st store.Messages, r Relay, log *slog.Logger) Writer {
	if r == nil {
		return Unlogged(st)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if tx, ok := st.(store.TransactionalOutbox); ok && r.RelayStore(tx) {
		return transactional{tx: tx, relay: r}
	}
	return queued{st: st, pub: r, log: log}
}

// Unlogged returns the Writer of a process without an event log: message
// changes go to st alone.
func Unlogged(st store.Messages) Writer { return unlogged{st: st} }

// StoredEvent is the event of a create or update of m, as the store holds
// it: its mentions are the ones the write was authorised with (users who
// see the channel, mentionable roles, @everyone when allowed), which the
// read-state consumer counts.
func StoredEvent(typ string, m store.Message) eventlog.MessageEvent {
	return eventlog.MessageEvent{
		Type: typ, GuildID: m.GuildID, ChannelID: m.ChannelID, MessageID: m.ID, AuthorID: m.AuthorID,
		Mentions: m.Mentions, MentionRoles: m.MentionRoles, MentionEveryone: m.MentionEveryone, Content: m.Content,
	}
}

// deleteEvent is the MESSAGE_DELETE of a stored message m of guildID.
func deleteEvent(guildID snowflake.ID, m store.Message) eventlog.MessageEvent {
	return eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guildID, ChannelID: m.ChannelID,
		MessageID: m.ID, AuthorID: m.AuthorID, Mentions: m.Mentions, MentionRoles: m.MentionRoles}
}

// storeEvent converts an event to the record the store commits.
func storeEvent(ev eventlog.MessageEvent) (store.Event, error) {
	rec, err := ev.Record()
	if err != nil {
		return store.Event{}, fmt.Errorf("outbox: event of message %d: %w", ev.MessageID, err)
	}
	return store.Event{Topic: rec.Topic, Key: rec.Key, Value: rec.Value}, nil
}

// transactional commits each event in the store write it describes and
// wakes the relay of its shard.
type transactional struct {
	tx    store.TransactionalOutbox
	relay Relay
}

func (w transactional) PutMessage(ctx context.Context, typ string, m store.Message) (err error) {
	ctx, span := tracing.Start(ctx, "store.write", attribute.Bool("with_event", true))
	defer func() { tracing.End(span, err) }()
	ev, err := storeEvent(StoredEvent(typ, m))
	if err != nil {
		return err
	}
	if err := w.tx.PutMessageEvents(ctx, m, ev); err != nil {
		return err
	}
	// The event is in the store's outbox with the message: the relay
	// appends it to the log.
	_, ospan := tracing.Start(ctx, "outbox.commit")
	w.relay.Committed(store.OutboxShard(m.ChannelID))
	ospan.End()
	return nil
}

func (w transactional) DeleteMessage(ctx context.Context, guildID snowflake.ID, m store.Message) error {
	return w.DeleteMessages(ctx, guildID, m.ChannelID, []store.Message{m})
}

func (w transactional) DeleteMessages(ctx context.Context, guildID, channelID snowflake.ID, msgs []store.Message) error {
	ids := make([]snowflake.ID, len(msgs))
	evs := make([]store.Event, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
		m.ChannelID = channelID
		ev, err := storeEvent(deleteEvent(guildID, m))
		if err != nil {
			return err
		}
		evs[i] = ev
	}
	if err := w.tx.DeleteMessagesEvents(ctx, channelID, ids, evs...); err != nil {
		return err
	}
	w.relay.Committed(store.OutboxShard(channelID))
	return nil
}

// queued writes the store, then queues the event: the gap between the
// two is what the transactional path closes.
type queued struct {
	st  store.Messages
	pub eventlog.Publisher
	log *slog.Logger
}

func (w queued) PutMessage(ctx context.Context, typ string, m store.Message) error {
	sctx, span := tracing.Start(ctx, "store.write", attribute.Bool("with_event", false))
	err := w.st.PutMessage(sctx, m)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	w.publish(ctx, StoredEvent(typ, m))
	return nil
}

func (w queued) DeleteMessage(ctx context.Context, guildID snowflake.ID, m store.Message) error {
	if err := w.st.DeleteMessage(ctx, m.ChannelID, m.ID); err != nil {
		return err
	}
	w.publish(ctx, deleteEvent(guildID, m))
	return nil
}

func (w queued) DeleteMessages(ctx context.Context, guildID, channelID snowflake.ID, msgs []store.Message) error {
	ids := make([]snowflake.ID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	if err := w.st.DeleteMessages(ctx, channelID, ids); err != nil {
		return err
	}
	for _, m := range msgs {
		m.ChannelID = channelID
		w.publish(ctx, deleteEvent(guildID, m))
	}
	return nil
}

// publish queues ev; the change is stored already, so a failure is logged
// (the event is lost) rather than failing the write.
func (w queued) publish(ctx context.Context, ev eventlog.MessageEvent) {
	ctx, span := tracing.Start(ctx, "outbox.enqueue")
	err := w.pub.Publish(ctx, ev)
	tracing.End(span, err)
	if err != nil {
		w.log.Warn("message event not logged", "type", ev.Type, "message_id", ev.MessageID, "err", err)
	}
}

// unlogged writes the store alone.
type unlogged struct{ st store.Messages }

func (w unlogged) PutMessage(ctx context.Context, _ string, m store.Message) (err error) {
	ctx, span := tracing.Start(ctx, "store.write", attribute.Bool("with_event", false))
	defer func() { tracing.End(span, err) }()
	return w.st.PutMessage(ctx, m)
}

func (w unlogged) DeleteMessage(ctx context.Context, _ snowflake.ID, m store.Message) error {
	return w.st.DeleteMessage(ctx, m.ChannelID, m.ID)
}

func (w unlogged) DeleteMessages(ctx context.Context, _, channelID snowflake.ID, msgs []store.Message) error {
	ids := make([]snowflake.ID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return w.st.DeleteMessages(ctx, channelID, ids)
}
