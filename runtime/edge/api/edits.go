package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type editMessageRequest struct {
	Content         nullable[string]            `json:"content"`
	Embeds          nullable[[]json.RawMessage] `json:"embeds"`
	Components      nullable[[]json.RawMessage] `json:"components"`
	Flags           nullable[int]               `json:"flags"`
	AllowedMentions *allowedMentions            `json:"allowed_mentions"`
	Attachments     *[]attachmentRef            `json:"attachments"`
}

func decodeEditMessage(body []byte) (editMessageRequest, error) {
	var req editMessageRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	if utf8.RuneCountInString(req.Content.Value) > maxContent {
		return req, formError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	}
	return req, checkRich(&req.Embeds.Value, &req.Components.Value, nil, req.AllowedMentions)
}

// editableType reports whether messages of a type can be edited by their
// author: ordinary messages and replies (and the interaction messages a
// bot posts), not the system messages Concord posts for threads.
func editableType(t int) bool {
	return t != wire.MessageThreadCreated && t != wire.MessageThreadStarter
}

func (h *messageHandler) editMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, messageID, err := messagePath(r)
	if err != nil {
		return err
	}
	body, files, err := h.readMessagePayload(w, r)
	if err != nil {
		return err
	}
	req, err := decodeEditMessage(body)
	if err != nil {
		return err
	}
	ctx := r.Context()
	rd := h.reader(user)
	v, err := rd.access(ctx, channelID)
	if err != nil {
		return err
	}
	m, err := h.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return messageErr(err)
	}
	if m.AuthorID != user {
		return errNotAuthor
	}
	if !editableType(m.Type) {
		return errSystemMessage
	}
	if err := frozenThread(v.Channel); err != nil {
		return err
	}
	var mentions *guild.Mentions
	if req.Content.Set {
		if strings.TrimSpace(req.Content.Value) == "" && len(req.Embeds.Value) == 0 {
			return errEmptyMessage
		}
		p := parseMentions(req.Content.Value, req.AllowedMentions)
		mentions = &guild.Mentions{Everyone: p.Everyone, Users: p.Users, Roles: p.Roles}
		m.Content = req.Content.Value
	}
	if req.Flags.Set {
		// Only the sendable flags change; HAS_THREAD and the like stay.
		m.Flags = m.Flags&^sendableFlags | sendFlags(req.Flags.Value)
	}
	applyRichEdit(&m, req.Embeds, req.Components)
	before := m.Attachments
	removed, err := h.editAttachments(ctx, &m, req.Attachments, files)
	if err != nil {
		return err
	}
	m.EditedAt = h.now()
	ref, err := rd.prepare(ctx, m, nil)
	if err != nil {
		return err
	}
	// One call into the guild's actor checks the edit (new mentions as a
	// send resolves them, ATTACH_FILES for files), writes it with its
	// MESSAGE_UPDATE event and fans it out to the sessions that see the
	// channel, rendered by the reader.
	written, err := h.writeMessage(ctx, false, guild.MessageWrite{
		Check: guild.CheckEdit, UserID: user, Message: m, Mentions: mentions, Attachments: len(files) > 0,
		Render: rd.written(ref, mentions != nil),
	}, addedAttachments(before, m.Attachments), removed)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, written.Wire)
	return nil
}

func (h *messageHandler) deleteMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, messageID, err := messagePath(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// Access first: whether the message exists is told only to who sees
	// the channel.
	if _, err := h.reader(user).access(ctx, channelID); err != nil {
		return err
	}
	m, err := h.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return messageErr(err)
	}
	if m.Type == wire.MessageThreadStarter {
		return errSystemMessage
	}
	// One call into the guild's actor checks the deletion (MANAGE_MESSAGES
	// for another's message, then an archived thread), deletes the message with its MESSAGE_DELETE
	// event and fans it out. With the store's outbox, a message a
	// concurrent delete removed since it was read is a 204 with a
	// duplicate event (consumers dedupe) rather than a 404.
	err = h.messages.Delete(ctx, guild.MessageDelete{ChannelID: channelID, Messages: []store.Message{m},
		UserID: user, ManageMessages: m.AuthorID != user})
	if err != nil {
		return writeErr(err)
	}
	bg, cancel := background(ctx)
	defer cancel()
	h.forgetAttachments(bg, m.Attachments)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// writeErr maps a failed message write (a delete, a pin): a message
// that is gone is 10008; the guild's own errors pass as they are.
func writeErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errUnknownMessage
	}
	return err
}

type bulkDeleteRequest struct {
	Messages []reqID `json:"messages"`
}

// bulkDeleteMaxAge is Discord's limit: only messages under 14 days old.
const bulkDeleteMaxAge = 14 * 24 * time.Hour

func decodeBulkDelete(body []byte) ([]snowflake.ID, error) {
	var req bulkDeleteRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	out := ids(req.Messages)
	if len(out) < 2 {
		return nil, formError("messages", "BASE_TYPE_MIN_LENGTH", "Must be 2 or more in length.")
	}
	if len(out) > 100 {
		return nil, formError("messages", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
	}
	// A duplicate id fails the whole request, as on Discord.
	slices.Sort(out)
	if len(slices.Compact(slices.Clone(out))) != len(out) {
		return nil, formError("messages", "BULK_DELETE_DUPLICATE_IDS", "Message ids must be unique.")
	}
	return out, nil
}

func (h *messageHandler) bulkDelete(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	list, err := decodeBulkDelete(body)
	if err != nil {
		return err
	}
	ctx := r.Context()
	v, err := h.guilds.Authorize(ctx, user, channelID, permissions.ManageMessages)
	if err != nil {
		return err
	}
	if err := frozenThread(v.Channel); err != nil {
		return err
	}
	cutoff := h.now().Add(-bulkDeleteMaxAge)
	for _, id := range list {
		if id.Time().Before(cutoff) {
			return errTooOld
		}
	}
	// Ids that name no message of this channel are ignored, as Discord
	// ignores them: they are neither deleted nor named in the event, so
	// MESSAGE_DELETE_BULK never shows this channel's viewers an id from
	// a channel they may not see.
	found := list[:0]
	var msgs []store.Message
	var atts []store.Attachment
	for _, id := range list {
		m, err := h.store.GetMessage(ctx, channelID, id)
		switch {
		case err == nil:
			found = append(found, id)
			msgs = append(msgs, m)
			atts = append(atts, m.Attachments...)
		case !errors.Is(err, store.ErrNotFound):
			return errors.Join(guild.ErrUnavailable, err)
		}
	}
	list = found
	if len(list) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	err = h.messages.Delete(ctx, guild.MessageDelete{ChannelID: channelID, Messages: msgs, UserID: user, ManageMessages: true})
	if err != nil {
		return writeErr(err)
	}
	bg, cancel := background(ctx)
	defer cancel()
	h.forgetAttachments(bg, atts)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
