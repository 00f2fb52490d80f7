package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/readstate"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/tracing"
	"github.com/concord-chat/concord/runtime/wire"
)

// EventPublisher takes message events for the durable event log after the
// store write and the response. Publish must return within a bounded time
// (the outbox writes locally and relays later); an error is logged, never
// turned into a failed request, because the message is already stored.
//
// A publisher that is also a StoreRelay, given a store that is a
// store.TransactionalOutbox, makes the send, edit and delete paths commit
// the event in the same atomic write as the message change instead: a
// crash between the store write and Publish can no longer lose the event
// that mention counting needs.
type EventPublisher interface {
	Publish(ctx context.Context, ev eventlog.MessageEvent) error
}

// StoreRelay is the optional side of an EventPublisher that relays a
// store's transactional outbox to the log; outbox.Outbox implements it.
type StoreRelay interface {
	// RelayStore starts relaying src's outbox; false when it cannot.
	RelayStore(src store.Outbox) bool
	// RelaysStore reports whether src's outbox is relayed.
	RelaysStore(src any) bool
	// Committed tells the relay a shard holds events just committed.
	Committed(shard int)
}

// bindOutbox starts the relay of the store's outbox when both sides
// support it. New calls it, so rows a crash left in the store's outbox
// are relayed as soon as the process is up, before any new write.
func bindOutbox(events EventPublisher, st store.Store) {
	r, ok := events.(StoreRelay)
	if !ok {
		return
	}
	if tx, ok := st.(store.TransactionalOutbox); ok {
		r.RelayStore(tx)
	}
}

// putMessageLogged writes m and, when the store commits events with
// message writes, its typ event in the same write; logged reports that
// the event was committed (the caller then does not publish it). The
// write and the event are the shared ones (outbox.PutMessage), which the
// bot platform's interaction responses use too.
func (h *handler) putMessageLogged(ctx context.Context, typ string, m store.Message) (logged bool, err error) {
	return outbox.PutMessage(ctx, h.store, h.eventsOrNil(), typ, m)
}

// deleteMessagesLogged deletes msgs (just read) of a channel and, when
// the store commits events with message writes, one MESSAGE_DELETE per
// message in the same write; logged reports that.
func (h *handler) deleteMessagesLogged(ctx context.Context, guildID, channelID snowflake.ID, msgs []store.Message) (logged bool, err error) {
	return outbox.DeleteMessages(ctx, h.store, h.eventsOrNil(), guildID, channelID, msgs)
}

// atomicEvents returns the store's event writer and the relay when
// events committed with message writes reach the log (outbox.Atomic); ok
// is false when the message must be written alone and its event
// published after.
func (h *handler) atomicEvents() (w store.MessageEvents, c outbox.Committer, ok bool) {
	return outbox.Atomic(h.store, h.eventsOrNil())
}

// eventsOrNil is the publisher as an untyped value: nil when there is
// none, so a nil EventPublisher never looks like a relay.
func (h *handler) eventsOrNil() any {
	if h.events == nil {
		return nil
	}
	return h.events
}

// ReadStates moves read markers; the read-state role implements it.
type ReadStates interface {
	Ack(ctx context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error)
}

// UserDispatcher sends a dispatch to every session of one user (MESSAGE_ACK
// to the user's other devices).
type UserDispatcher interface {
	DispatchToUser(ctx context.Context, userID snowflake.ID, eventType string, payload json.RawMessage)
}

// logMessage publishes a create or update to the event log.
func (h *handler) logMessage(ctx context.Context, typ string, m wire.Message) {
	if h.events == nil {
		return
	}
	ev := eventlog.MessageEvent{
		Type:            typ,
		GuildID:         m.GuildID,
		ChannelID:       m.ChannelID,
		MessageID:       m.ID,
		AuthorID:        m.Author.ID,
		MentionRoles:    m.MentionRoles,
		MentionEveryone: m.MentionEveryone,
		Content:         m.Content,
	}
	for _, u := range m.Mentions {
		ev.Mentions = append(ev.Mentions, u.ID)
	}
	ctx, span := tracing.Start(ctx, "outbox.enqueue")
	err := h.events.Publish(ctx, ev)
	tracing.End(span, err)
	if err != nil {
		h.log.Warn("message event not logged", "type", typ, "message_id", m.ID, "err", err)
	}
}

// logDeletes publishes one MESSAGE_DELETE per message to the event log.
func (h *handler) logDeletes(ctx context.Context, guildID, channelID snowflake.ID, ids []snowflake.ID) {
	if h.events == nil {
		return
	}
	for _, id := range ids {
		ev := eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guildID, ChannelID: channelID, MessageID: id}
		if err := h.events.Publish(ctx, ev); err != nil {
			h.log.Warn("message delete not logged", "message_id", id, "err", err)
		}
	}
}

// ackMessage is POST /channels/{channel}/messages/{message}/ack: it moves
// the user's read marker, clears the mention count and tells the user's
// sessions (MESSAGE_ACK) so every device's badge clears.
func (h *handler) ackMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, messageID, err := h.messagePath(r)
	if err != nil {
		return err
	}
	if h.reads == nil {
		return &apiError{Status: http.StatusNotFound, Code: 0, Message: "404: Not Found"}
	}
	ctx := r.Context()
	if _, err := h.guilds.Authorize(ctx, user, channelID, 0); err != nil {
		return err
	}
	ack, err := h.reads.Ack(ctx, user, channelID, messageID)
	if errors.Is(err, readstate.ErrForbidden) {
		return guild.ErrMissingAccess
	}
	if err != nil {
		// Anything else is the read-state service failing (closed, its
		// store, or no replica reachable): a 503 the client may retry.
		return errors.Join(guild.ErrUnavailable, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": nil})
	if h.users != nil {
		payload, err := json.Marshal(ack)
		if err == nil {
			bg, cancel := background(ctx)
			defer cancel()
			h.users.DispatchToUser(bg, user, "MESSAGE_ACK", payload)
		}
	}
	return nil
}
