package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Executing a webhook: POST /webhooks/{id}/{token}[?wait=true][&thread_id=]
// posts as the webhook (author id = webhook id, bot, with the name and
// avatar of the request's username/avatar_url overrides or the
// webhook's), into its channel or a thread of it. Without wait the answer
// is 204 and no message; with it, the message.
//
// Executions are rate-limited per webhook and per channel (webhooklimit.go).

type executeWebhookRequest struct {
	Content         string            `json:"content"`
	Username        string            `json:"username"`
	AvatarURL       string            `json:"avatar_url"`
	TTS             bool              `json:"tts"`
	Embeds          []json.RawMessage `json:"embeds"`
	Components      []json.RawMessage `json:"components"`
	StickerIDs      []reqID           `json:"sticker_ids"`
	AllowedMentions *allowedMentions  `json:"allowed_mentions"`
	Flags           int               `json:"flags"`
	ThreadName      string            `json:"thread_name"`
	Attachments     []attachmentRef   `json:"attachments"`
}

func decodeExecuteWebhook(body []byte, files int) (executeWebhookRequest, error) {
	var req executeWebhookRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	if utf8.RuneCountInString(req.Content) > maxContent {
		return req, formError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	}
	if req.Username != "" {
		if err := checkWebhookName("username", req.Username); err != nil {
			return req, err
		}
	}
	if req.ThreadName != "" {
		return req, formError("thread_name", "WEBHOOK_THREAD_NAME", "Concord does not create forum posts through webhooks (forum channels have no webhooks): post with POST /channels/{forum}/threads.")
	}
	if err := checkRich(&req.Embeds, &req.Components, req.StickerIDs, req.AllowedMentions); err != nil {
		return req, err
	}
	if strings.TrimSpace(req.Content) == "" && len(req.Embeds) == 0 && len(req.Components) == 0 && files == 0 {
		return req, errEmptyMessage
	}
	return req, nil
}

// webhookTarget resolves ?thread_id against the webhook: 0 is the
// webhook's channel; a thread must be one of that channel.
func (h *webhookExecHandler) webhookTarget(r *http.Request, wh store.Webhook) (snowflake.ID, error) {
	s := r.URL.Query().Get("thread_id")
	if s == "" {
		return 0, nil
	}
	id, err := snowflake.Parse(s)
	if err != nil {
		return 0, formError("thread_id", "NUMBER_TYPE_COERCE", "Value \""+truncate(s, 30)+"\" is not snowflake.")
	}
	c, err := h.store.GetChannel(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (c.Thread == nil || c.ParentID != wh.ChannelID) {
		return 0, guild.ErrUnknownChannel
	}
	if err != nil {
		return 0, errors.Join(guild.ErrUnavailable, err)
	}
	return id, nil
}

// avatarURLHash names an avatar_url override; the image is not fetched
// (no egress for it), so the author's avatar is a stable hash of the URL.
func avatarURLHash(u string) string {
	sum := sha256.Sum256([]byte(u))
	return hex.EncodeToString(sum[:16])
}

// executeWebhook is POST /webhooks/{id}/{token}.
func (h *webhookExecHandler) executeWebhook(w http.ResponseWriter, r *http.Request) error {
	wh, err := tokenWebhook(r, h.store)
	if err != nil {
		return err
	}
	wait := false
	switch v := r.URL.Query().Get("wait"); strings.ToLower(v) {
	case "", "false", "0":
	case "true", "1":
		wait = true
	default:
		return formError("wait", "BASE_TYPE_BOOLEAN", "Must be either true or false.")
	}
	threadID, err := h.webhookTarget(r, wh)
	if err != nil {
		return err
	}
	body, files, err := h.readMessagePayload(w, r)
	if err != nil {
		return err
	}
	req, err := decodeExecuteWebhook(body, len(files))
	if err != nil {
		return err
	}
	target := wh.ChannelID
	if threadID != 0 {
		target = threadID
	}
	if q := h.limit.take(wh.ID, target, h.now()); !q.write(w, h.now()) {
		return nil
	}
	ctx := r.Context()
	mentions := parseMentions(req.Content, req.AllowedMentions)
	// The files are stored before the write that names them, and deleted
	// again when the post is refused.
	atts, err := h.saveAttachments(ctx, target, req.Attachments, files)
	if err != nil {
		return err
	}
	m := store.Message{
		ChannelID: target, GuildID: wh.GuildID, AuthorID: wh.ID, Content: req.Content,
		Type: wire.MessageDefault, TTS: req.TTS, Flags: sendFlags(req.Flags),
		Embeds: wire.JoinRaw(req.Embeds), Components: wire.JoinRaw(req.Components), Attachments: atts,
		WebhookID: wh.ID, WebhookName: wh.Name, WebhookAvatar: wh.Avatar,
	}
	if req.Username != "" {
		m.WebhookName = req.Username
	}
	if req.AvatarURL != "" {
		m.WebhookAvatar = avatarURLHash(req.AvatarURL)
	}
	written, err := h.writeMessage(ctx, true, guild.MessageWrite{
		Check: guild.CheckWebhook, WebhookChannel: wh.ChannelID, Message: m,
		Mentions: &guild.Mentions{Everyone: mentions.Everyone, Users: mentions.Users, Roles: mentions.Roles},
		Render:   h.webhookRender,
	}, atts, nil)
	if err != nil {
		return err
	}
	out := written.Wire
	if !wait {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// webhookRender is the Render of a webhook's message write
// (guild.MessageWrite): webhookMessageJSON, which asks the guild nothing.
func (h *webhookExecHandler) webhookRender(ctx context.Context, w guild.Written) (wire.Message, error) {
	return h.webhookMessageJSON(ctx, w.Message), nil
}

// webhookMessageJSON renders a message for its webhook's token routes:
// the webhook posted it into its own channel, which is all it reads, so
// no viewer decision applies (webhook messages never reply).
func (h *webhookExecHandler) webhookMessageJSON(ctx context.Context, m store.Message) wire.Message {
	return h.wireMessage(ctx, m, nil, nil)
}

// webhookAuthor is the author object of a webhook's message.
func webhookAuthor(m store.Message) wire.User {
	u := wire.User{ID: m.WebhookID, Username: m.WebhookName, Discriminator: "0000", Bot: true}
	if m.WebhookAvatar != "" {
		av := m.WebhookAvatar
		u.Avatar = &av
	}
	return u
}

// webhookOwnMessage loads a message the webhook posted, from its channel
// or the thread ?thread_id names; any other message is 10008.
func (h *webhookExecHandler) webhookOwnMessage(r *http.Request) (store.Webhook, store.Message, error) {
	wh, err := tokenWebhook(r, h.store)
	if err != nil {
		return wh, store.Message{}, err
	}
	threadID, err := h.webhookTarget(r, wh)
	if err != nil {
		return wh, store.Message{}, err
	}
	channelID := wh.ChannelID
	if threadID != 0 {
		channelID = threadID
	}
	messageID, err := pathID(r, "message", errUnknownMessage)
	if err != nil {
		return wh, store.Message{}, err
	}
	m, err := h.store.GetMessage(r.Context(), channelID, messageID)
	if err != nil {
		return wh, store.Message{}, messageErr(err)
	}
	if m.WebhookID != wh.ID {
		return wh, store.Message{}, errUnknownMessage
	}
	return wh, m, nil
}

// webhookMessageFrozen is ErrThreadArchived when the webhook's message m
// is in an archived thread (edits and deletes wait for an unarchive).
func (h *webhookExecHandler) webhookMessageFrozen(ctx context.Context, wh store.Webhook, m store.Message) error {
	if m.ChannelID == wh.ChannelID {
		return nil
	}
	c, err := h.store.GetChannel(ctx, m.ChannelID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return guild.ErrUnknownChannel
	case err != nil:
		return errors.Join(guild.ErrUnavailable, err)
	}
	return frozenThread(c)
}

// getWebhookMessage is GET /webhooks/{id}/{token}/messages/{m}.
func (h *webhookExecHandler) getWebhookMessage(w http.ResponseWriter, r *http.Request) error {
	_, m, err := h.webhookOwnMessage(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.webhookMessageJSON(r.Context(), m))
	return nil
}

type editWebhookMessageRequest struct {
	editMessageRequest
	Attachments *[]attachmentRef `json:"attachments"`
}

// editWebhookMessage is PATCH /webhooks/{id}/{token}/messages/{m}.
func (h *webhookExecHandler) editWebhookMessage(w http.ResponseWriter, r *http.Request) error {
	wh, m, err := h.webhookOwnMessage(r)
	if err != nil {
		return err
	}
	if err := h.webhookMessageFrozen(r.Context(), wh, m); err != nil {
		return err
	}
	body, files, err := h.readMessagePayload(w, r)
	if err != nil {
		return err
	}
	var req editWebhookMessageRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if utf8.RuneCountInString(req.Content.Value) > maxContent {
		return formError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	}
	if err := checkRich(&req.Embeds.Value, &req.Components.Value, nil, req.AllowedMentions); err != nil {
		return err
	}
	ctx := r.Context()
	var mentions *guild.Mentions
	if req.Content.Set {
		p := parseMentions(req.Content.Value, req.AllowedMentions)
		mentions = &guild.Mentions{Everyone: p.Everyone, Users: p.Users, Roles: p.Roles}
		m.Content = req.Content.Value
	}
	if req.Flags.Set {
		m.Flags = sendFlags(req.Flags.Value)
	}
	applyRichEdit(&m, req.Embeds, req.Components)
	before := m.Attachments
	removed, err := h.editAttachments(ctx, &m, req.Attachments, files)
	if err != nil {
		return err
	}
	if strings.TrimSpace(m.Content) == "" && m.Embeds == "" && m.Components == "" && len(m.Attachments) == 0 {
		h.forgetAttachments(ctx, addedAttachments(before, m.Attachments))
		return errEmptyMessage
	}
	m.EditedAt = h.now()
	written, err := h.writeMessage(ctx, false, guild.MessageWrite{
		Check: guild.CheckWebhook, WebhookChannel: wh.ChannelID, Message: m, Mentions: mentions, Render: h.webhookRender,
	}, addedAttachments(before, m.Attachments), removed)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, written.Wire)
	return nil
}

// deleteWebhookMessage is DELETE /webhooks/{id}/{token}/messages/{m}.
func (h *webhookExecHandler) deleteWebhookMessage(w http.ResponseWriter, r *http.Request) error {
	wh, m, err := h.webhookOwnMessage(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := h.webhookMessageFrozen(ctx, wh, m); err != nil {
		return err
	}
	if err := h.messages.Delete(ctx, guild.MessageDelete{ChannelID: m.ChannelID, Messages: []store.Message{m}}); err != nil {
		return writeErr(err)
	}
	bg, cancel := background(ctx)
	defer cancel()
	h.forgetAttachments(bg, m.Attachments)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
