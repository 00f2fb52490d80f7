package outbox

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/tracing"
)

// Committer is the side of a relay that message writers commit events
// to; *Outbox implements it.
type Committer interface {
	// RelaysStore reports whether src's outbox is relayed.
	RelaysStore(src any) bool
	// Committed tells the relay a shard holds events just committed.
	Committed(shard int)
}

// Atomic returns st's event writer and the relay when events committed
// with message writes reach the log: st is a store.TransactionalOutbox
// and events (the process's message-event publisher) relays that very
// store. ok is false when a message must be written alone and its event
// published after it.
func Atomic(st store.Messages, events any) (w store.MessageEvents, c Committer, ok bool) {
	if events == nil {
		return nil, nil, false
	}
	c, ok = events.(Committer)
	if !ok {
		return nil, nil, false
	}
	tx, ok := st.(store.TransactionalOutbox)
	if !ok || !c.RelaysStore(tx) {
		return nil, nil, false
	}
	return tx, c, true
}

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

// storeEvent converts an event to the record the store commits.
func storeEvent(ev eventlog.MessageEvent) (store.Event, error) {
	rec, err := ev.Record()
	if err != nil {
		return store.Event{}, err
	}
	return store.Event{Topic: rec.Topic, Key: rec.Key, Value: rec.Value}, nil
}

// PutMessage writes m and, when Atomic allows, its typ event
// (StoredEvent) in the same atomic store write; logged reports that the
// event was committed, so the caller must not publish it again. With
// logged false the message was written alone and the caller publishes.
func PutMessage(ctx context.Context, st store.Messages, events any, typ string, m store.Message) (logged bool, err error) {
	w, c, ok := Atomic(st, events)
	ctx, span := tracing.Start(ctx, "store.write", attribute.Bool("with_event", ok))
	defer func() { tracing.End(span, err) }()
	if !ok {
		return false, st.PutMessage(ctx, m)
	}
	ev, err := storeEvent(StoredEvent(typ, m))
	if err != nil {
		return false, err
	}
	if err := w.PutMessageEvents(ctx, m, ev); err != nil {
		return false, err
	}
	// The event is in the store's outbox with the message: the relay
	// appends it to the log.
	_, ospan := tracing.Start(ctx, "outbox.commit")
	c.Committed(store.OutboxShard(m.ChannelID))
	ospan.End()
	return true, nil
}

// DeleteMessages deletes msgs, stored messages of one channel the caller
// has just read, and, when Atomic allows, one MESSAGE_DELETE per message
// in the same atomic store write; logged as for PutMessage. Each delete
// carries the mentions its message was stored with, so the read-state
// consumer lowers the counts the message raised.
func DeleteMessages(ctx context.Context, st store.Messages, events any, guildID, channelID snowflake.ID, msgs []store.Message) (logged bool, err error) {
	ids := make([]snowflake.ID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	w, c, ok := Atomic(st, events)
	if !ok {
		return false, st.DeleteMessages(ctx, channelID, ids)
	}
	evs := make([]store.Event, 0, len(msgs))
	for _, m := range msgs {
		ev, err := storeEvent(eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guildID, ChannelID: channelID,
			MessageID: m.ID, AuthorID: m.AuthorID, Mentions: m.Mentions, MentionRoles: m.MentionRoles})
		if err != nil {
			return false, err
		}
		evs = append(evs, ev)
	}
	if err := w.DeleteMessagesEvents(ctx, channelID, ids, evs...); err != nil {
		return false, err
	}
	c.Committed(store.OutboxShard(channelID))
	return true, nil
}

// DeleteMessage deletes one stored message m and, when Atomic allows, its
// MESSAGE_DELETE in the same atomic store write; without the outbox it is
// st.DeleteMessage (which reports a message that is not there). logged as
// for PutMessage.
func DeleteMessage(ctx context.Context, st store.Messages, events any, guildID snowflake.ID, m store.Message) (logged bool, err error) {
	if _, _, ok := Atomic(st, events); !ok {
		return false, st.DeleteMessage(ctx, m.ChannelID, m.ID)
	}
	return DeleteMessages(ctx, st, events, guildID, m.ChannelID, []store.Message{m})
}
