package bots

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// webhookInteraction authenticates the interaction token of a followup
// route: unknown, forged, foreign (another application's) and expired
// tokens are 50027; an interaction not acknowledged yet has no webhook.
func (h *Handler) webhookInteraction(r *http.Request) (Interaction, error) {
	appID, err := pathID(r, "app", ErrInvalidWebhookToken)
	if err != nil {
		return Interaction{}, err
	}
	token := r.PathValue("token")
	id, ok := tokenInteraction(token)
	if !ok {
		return Interaction{}, ErrInvalidWebhookToken
	}
	in, err := h.deps.Store.GetInteraction(r.Context(), id)
	if err != nil {
		return Interaction{}, storeErr(err, ErrInvalidWebhookToken)
	}
	if !h.keys.checkToken(in, token) || in.ApplicationID != appID ||
		h.cfg.Clock.Now().Sub(in.CreatedAt) >= h.cfg.TokenLifetime {
		return Interaction{}, ErrInvalidWebhookToken
	}
	if in.State != StateAcknowledged {
		return Interaction{}, ErrUnknownWebhook
	}
	return in, nil
}

// webhookMessage resolves {msg}: "@original" or one of the interaction's
// own followups; any other message is unknown to this token.
func webhookMessage(r *http.Request, in Interaction) (snowflake.ID, error) {
	raw := r.PathValue("msg")
	if raw == "@original" {
		if in.ResponseMessageID == 0 {
			return 0, ErrUnknownMessage
		}
		return in.ResponseMessageID, nil
	}
	id, err := snowflake.Parse(raw)
	if err != nil || (id != in.ResponseMessageID && !slices.Contains(in.FollowupIDs, id)) {
		return 0, ErrUnknownMessage
	}
	return id, nil
}

// ephemeralTo returns the recipient of messageID when it is ephemeral.
func ephemeralTo(in Interaction, messageID snowflake.ID) snowflake.ID {
	if in.Ephemeral && messageID == in.ResponseMessageID {
		return in.UserID
	}
	return 0
}

// followup is POST /webhooks/{app}/{token}: right after a deferral it
// fills the loading message; otherwise it posts a new message. The
// message is returned either way.
func (h *Handler) followup(w http.ResponseWriter, r *http.Request) error {
	d, in, unlock, err := h.lockedWebhookMessage(w, r, true)
	if err != nil {
		return err
	}
	defer unlock()
	ctx := r.Context()
	var m wire.Message
	if in.Loading {
		flags := MessageFlagEphemeral & boolFlag(in.Ephemeral)
		e := MessageEdit{
			ChannelID: in.ChannelID, MessageID: in.ResponseMessageID, Content: d.Content, Embeds: d.Embeds,
			Components: d.Components, Flags: &flags, EphemeralTo: ephemeralTo(in, in.ResponseMessageID),
			AllowedMentions: d.AllowedMentions,
		}
		if e.Attachments, err = editFiles(ctx, d, in.ChannelID); err != nil {
			return err
		}
		m, err = h.deps.Messages.EditMessage(ctx, e)
	} else {
		nm := NewMessage{
			ChannelID: in.ChannelID, GuildID: in.GuildID, AuthorID: in.BotUserID, Type: MessageTypeDefault,
			TTS: d.TTS, InteractionID: in.ID, Embeds: []json.RawMessage{}, Components: []json.RawMessage{},
		}
		if d.Flags != nil {
			nm.Flags = *d.Flags
			if nm.Flags&MessageFlagEphemeral != 0 {
				nm.EphemeralTo = in.UserID
			}
		}
		fillMessage(&nm, d)
		if nm.Attachments, err = saveFiles(ctx, d.files, in.ChannelID, d.Attachments); err != nil {
			return err
		}
		m, err = h.deps.Messages.CreateMessage(ctx, nm)
	}
	if err != nil {
		return err
	}
	_, err = h.deps.Store.UpdateInteraction(ctx, in.ID, func(s *Interaction) error {
		if s.Loading {
			s.Loading = false
		} else {
			s.FollowupIDs = append(s.FollowupIDs, m.ID)
		}
		return nil
	})
	if err != nil {
		return storeErr(err, ErrInvalidWebhookToken)
	}
	// Interaction followups answer with the message whatever ?wait says,
	// as Discord's do (discord.py reads it without asking for it).
	writeJSON(w, http.StatusOK, m)
	return nil
}

// lockedWebhookMessage reads and checks the message payload of a webhook
// request (needBody as for checkMessage), finds the interaction its token
// names, locks it and reads it again under the lock. The caller calls
// unlock; on error nothing is locked.
func (h *Handler) lockedWebhookMessage(w http.ResponseWriter, r *http.Request, needBody bool) (messageData, Interaction, func(), error) {
	var d messageData
	body, files, err := h.readPayload(w, r)
	if err != nil {
		return d, Interaction{}, nil, err
	}
	if err := decodeJSON(body, &d); err != nil {
		return d, Interaction{}, nil, err
	}
	d.files = files
	if err := checkMessage(&d, "", needBody); err != nil {
		return d, Interaction{}, nil, err
	}
	in, err := h.webhookInteraction(r)
	if err != nil {
		return d, Interaction{}, nil, err
	}
	unlock := h.lockInteraction(in.ID)
	if in, err = h.deps.Store.GetInteraction(r.Context(), in.ID); err != nil {
		unlock()
		return d, Interaction{}, nil, storeErr(err, ErrInvalidWebhookToken)
	}
	return d, in, unlock, nil
}

func boolFlag(b bool) int {
	if b {
		return -1
	}
	return 0
}

func (h *Handler) getWebhookMessage(w http.ResponseWriter, r *http.Request) error {
	in, err := h.webhookInteraction(r)
	if err != nil {
		return err
	}
	id, err := webhookMessage(r, in)
	if err != nil {
		return err
	}
	m, err := h.deps.Messages.GetMessage(r.Context(), in.ChannelID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// editWebhookMessage is PATCH …/messages/@original|{id}; editing a
// loading deferral fills it.
func (h *Handler) editWebhookMessage(w http.ResponseWriter, r *http.Request) error {
	d, in, unlock, err := h.lockedWebhookMessage(w, r, false)
	if err != nil {
		return err
	}
	defer unlock()
	ctx := r.Context()
	id, err := webhookMessage(r, in)
	if err != nil {
		return err
	}
	e := MessageEdit{
		ChannelID: in.ChannelID, MessageID: id, Content: d.Content, Embeds: d.Embeds,
		Components: d.Components, EphemeralTo: ephemeralTo(in, id), AllowedMentions: d.AllowedMentions,
	}
	filling := in.Loading && id == in.ResponseMessageID
	if filling {
		flags := MessageFlagEphemeral & boolFlag(in.Ephemeral)
		e.Flags = &flags
	}
	if e.Attachments, err = editFiles(ctx, d, in.ChannelID); err != nil {
		return err
	}
	m, err := h.deps.Messages.EditMessage(ctx, e)
	if err != nil {
		return err
	}
	if filling {
		if _, err := h.deps.Store.UpdateInteraction(ctx, in.ID, func(s *Interaction) error {
			s.Loading = false
			return nil
		}); err != nil {
			return storeErr(err, ErrInvalidWebhookToken)
		}
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (h *Handler) deleteWebhookMessage(w http.ResponseWriter, r *http.Request) error {
	in, err := h.webhookInteraction(r)
	if err != nil {
		return err
	}
	id, err := webhookMessage(r, in)
	if err != nil {
		return err
	}
	if err := h.deps.Messages.DeleteMessage(r.Context(), in.ChannelID, id, ephemeralTo(in, id)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
