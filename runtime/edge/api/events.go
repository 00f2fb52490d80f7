package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// EventPublisher takes message events for the durable event log that
// are not part of a message write: the REST API republishes the event of
// a send an enforce_nonce retry finds already stored (its writer may have
// died before the event left). Message writes log their events through
// the guild service's outbox.Writer (guild.Deps.Messages). Publish must
// return within a bounded time (the outbox writes locally and relays
// later); an error is logged, never turned into a failed request.
type EventPublisher interface {
	Publish(ctx context.Context, ev eventlog.MessageEvent) error
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

// logMessage publishes a create or update to the event log (the
// enforce_nonce replay of a stored send).
func (h *messageHandler) logMessage(ctx context.Context, typ string, m wire.Message) {
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

// ackMessage is POST /channels/{channel}/messages/{message}/ack: it moves
// the user's read marker, clears the mention count and tells the user's
// sessions (MESSAGE_ACK) so every device's badge clears.
func (h *messageHandler) ackMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, messageID, err := messagePath(r)
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
