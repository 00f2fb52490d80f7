package bots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/mention"
	"github.com/concord-chat/concord/runtime/domain/rich"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Callback types.
const (
	CallbackPong                   = 1
	CallbackChannelMessage         = 4
	CallbackDeferredChannelMessage = 5
	CallbackDeferredUpdateMessage  = 6
	CallbackUpdateMessage          = 7
	CallbackAutocompleteResult     = 8
	CallbackModal                  = 9
	messageFlagsAllowed            = MessageFlagEphemeral | 1<<2 | 1<<12 // ephemeral, suppress embeds, suppress notifications
	maxContentRunes                = 2000
	maxComponents, maxOpt          = 5, 25
)

// callbackAllowed lists the callback types each interaction type accepts.
var callbackAllowed = map[int][]int{
	InteractionApplicationCommand: {CallbackChannelMessage, CallbackDeferredChannelMessage, CallbackModal},
	InteractionMessageComponent:   {CallbackChannelMessage, CallbackDeferredChannelMessage, CallbackDeferredUpdateMessage, CallbackUpdateMessage, CallbackModal},
	InteractionAutocomplete:       {CallbackAutocompleteResult},
	InteractionModalSubmit:        {CallbackChannelMessage, CallbackDeferredChannelMessage, CallbackDeferredUpdateMessage, CallbackUpdateMessage},
}

// messageData is a message in a callback or webhook body.
type messageData struct {
	Content    *string            `json:"content"`
	Embeds     *[]json.RawMessage `json:"embeds"`
	Components *[]json.RawMessage `json:"components"`
	Flags      *int               `json:"flags"`
	TTS        bool               `json:"tts"`
	Choices    *[]json.RawMessage `json:"choices"`
	CustomID   string             `json:"custom_id"`
	Title      string             `json:"title"`
	// Attachments is the attachments array of a body with files.
	Attachments json.RawMessage `json:"attachments"`
	// AllowedMentions limits which of the content's mentions ping, as on
	// a channel message.
	AllowedMentions *mention.Allowed `json:"allowed_mentions"`

	// files are the body's uploads (followups and edits).
	files PendingFiles
}

type callbackRequest struct {
	Type int         `json:"type"`
	Data messageData `json:"data"`
}

// checkMessage validates a message body under path; needBody requires
// content, embeds or components.
// Embeds and components are checked against Discord's limits and replaced
// by their normalised form (rich).
func checkMessage(d *messageData, path string, needBody bool) error {
	if d.Content != nil && runes(*d.Content) > maxContentRunes {
		return FormError(join(path, "content"), "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	}
	if d.Embeds != nil {
		out, err := rich.Embeds(join(path, "embeds"), *d.Embeds)
		if err != nil {
			return err
		}
		*d.Embeds = out
	}
	if d.Components != nil {
		out, err := rich.Components(join(path, "components"), *d.Components, false)
		if err != nil {
			return err
		}
		*d.Components = out
	}
	if p := d.AllowedMentions.Check(); p != nil {
		return FormError(join(path, p.Field), p.Code, p.Message)
	}
	if d.Flags != nil && *d.Flags&^messageFlagsAllowed != 0 {
		return FormError(join(path, "flags"), "MESSAGE_FLAGS_INVALID", "Only EPHEMERAL, SUPPRESS_EMBEDS and SUPPRESS_NOTIFICATIONS can be set.")
	}
	if needBody && (d.Content == nil || strings.TrimSpace(*d.Content) == "") &&
		(d.Embeds == nil || len(*d.Embeds) == 0) && (d.Components == nil || len(*d.Components) == 0) && !hasRefs(d.Attachments) {
		return &APIError{Status: http.StatusBadRequest, Code: 50006, Message: "Cannot send an empty message"}
	}
	return nil
}

// decodeCallback decodes and validates a callback body for an
// interaction of type ixType.
func decodeCallback(body []byte, ixType int) (callbackRequest, error) {
	var req callbackRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	allowed := false
	for _, t := range callbackAllowed[ixType] {
		allowed = allowed || t == req.Type
	}
	if !allowed {
		return req, FormError("type", "INTERACTION_RESPONSE_TYPE_INVALID", fmt.Sprintf("Callback type %d is not valid for interaction type %d.", req.Type, ixType))
	}
	switch req.Type {
	case CallbackChannelMessage:
		return req, checkMessage(&req.Data, "data", true)
	case CallbackUpdateMessage, CallbackDeferredChannelMessage:
		return req, checkMessage(&req.Data, "data", false)
	case CallbackAutocompleteResult:
		if req.Data.Choices == nil || len(*req.Data.Choices) > maxOpt {
			return req, FormError("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be an array of 25 or fewer choices.")
		}
	case CallbackModal:
		if n := runes(req.Data.CustomID); n < 1 || n > 100 {
			return req, FormError("data.custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
		if n := runes(req.Data.Title); n < 1 || n > 45 {
			return req, FormError("data.title", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 45 in length.")
		}
		if req.Data.Components == nil || len(*req.Data.Components) < 1 || len(*req.Data.Components) > maxComponents {
			return req, FormError("data.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")
		}
		out, err := rich.Components("data.components", *req.Data.Components, true)
		if err != nil {
			return req, err
		}
		*req.Data.Components = out
	}
	return req, nil
}

// readPayload reads a JSON body or a multipart one: through Deps.Uploads
// with its files when set, else only its payload_json.
func (h *Handler) readPayload(w http.ResponseWriter, r *http.Request) ([]byte, PendingFiles, error) {
	if h.deps.Uploads != nil {
		return h.deps.Uploads.ReadPayload(w, r)
	}
	body, err := h.readPayloadJSON(w, r)
	return body, nil, err
}

// readPayloadJSON reads a JSON body or the payload_json of a multipart one
// (its files are ignored).
func (h *Handler) readPayloadJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return readBody(w, r, h.cfg.MaxBodyBytes)
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	if err := r.ParseMultipartForm(h.cfg.MaxBodyBytes); err != nil {
		return nil, FormError("", "BODY_READ_FAILED", "The multipart body could not be read.")
	}
	return []byte(r.FormValue("payload_json")), nil
}

// callbackResponse is the with_response answer of a callback.
type callbackResponse struct {
	Interaction callbackInteraction `json:"interaction"`
	Resource    *callbackResource   `json:"resource,omitempty"`
}

type callbackInteraction struct {
	ID                       snowflake.ID  `json:"id"`
	Type                     int           `json:"type"`
	ResponseMessageID        *snowflake.ID `json:"response_message_id,omitempty"`
	ResponseMessageLoading   *bool         `json:"response_message_loading,omitempty"`
	ResponseMessageEphemeral *bool         `json:"response_message_ephemeral,omitempty"`
	ActivityInstanceID       *string       `json:"activity_instance_id,omitempty"`
}

type callbackResource struct {
	Type    int           `json:"type"`
	Message *wire.Message `json:"message,omitempty"`
}

// callback is POST /interactions/{id}/{token}/callback[?with_response=]:
// the first response to an interaction, inside the acknowledgement window
// and only once (40060 after that; 10062 once the window has passed or
// for a token that is not this interaction's).
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) (err error) {
	id, err := pathID(r, "id", ErrUnknownInteraction)
	if err != nil {
		return err
	}
	ctx, span := h.callbackSpan(r.Context(), id)
	defer func() { tracing.End(span, err) }()
	token := r.PathValue("token")
	if tid, ok := tokenInteraction(token); !ok || tid != id {
		return ErrUnknownInteraction
	}
	in, err := h.deps.Store.GetInteraction(ctx, id)
	if err != nil {
		return storeErr(err, ErrUnknownInteraction)
	}
	if !h.keys.checkToken(in, token) || h.cfg.Clock.Now().Sub(in.CreatedAt) >= h.cfg.TokenLifetime {
		return ErrUnknownInteraction
	}
	body, files, err := h.readPayload(w, r)
	if err != nil {
		return err
	}
	res, err := h.respond(withFiles(ctx, files), id, body)
	if err != nil {
		return err
	}
	switch strings.ToLower(r.URL.Query().Get("with_response")) {
	case "true", "1":
		writeJSON(w, http.StatusOK, res)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// respond applies a callback body to interaction id: the path shared by
// /callback and an endpoint's inline answer. The response's effect (the
// message) happens before the interaction is marked acknowledged, so a
// failed effect can be retried inside the window.
func (h *Handler) respond(ctx context.Context, id snowflake.ID, body []byte) (callbackResponse, error) {
	unlock := h.lockInteraction(id)
	defer unlock()
	in, err := h.deps.Store.GetInteraction(ctx, id)
	if err != nil {
		return callbackResponse{}, storeErr(err, ErrUnknownInteraction)
	}
	switch {
	case in.State == StateAcknowledged:
		return callbackResponse{}, ErrAlreadyAcknowledged
	case in.State == StateTimedOut, !h.cfg.Clock.Now().Before(in.CreatedAt.Add(h.cfg.AckWindow)):
		return callbackResponse{}, fmt.Errorf("%w: acknowledgement window passed", ErrUnknownInteraction)
	}
	req, err := decodeCallback(body, in.Type)
	if err != nil {
		return callbackResponse{}, err
	}
	res := callbackResponse{Interaction: callbackInteraction{ID: in.ID, Type: in.Type}}
	ephemeral := req.Data.Flags != nil && *req.Data.Flags&MessageFlagEphemeral != 0
	var ephemeralTo snowflake.ID
	if ephemeral {
		ephemeralTo = in.UserID
	}
	var msg *wire.Message
	loading := false
	switch req.Type {
	case CallbackChannelMessage, CallbackDeferredChannelMessage:
		nm := NewMessage{
			ChannelID: in.ChannelID, GuildID: in.GuildID, AuthorID: in.BotUserID, Type: MessageTypeDefault,
			EphemeralTo: ephemeralTo, InteractionID: in.ID, TTS: req.Data.TTS, Embeds: []json.RawMessage{}, Components: []json.RawMessage{},
		}
		if in.Type == InteractionApplicationCommand {
			nm.Type = MessageTypeChatInputCommand
		}
		if req.Data.Flags != nil {
			nm.Flags = *req.Data.Flags
		}
		if req.Type == CallbackDeferredChannelMessage {
			nm.Flags, loading = nm.Flags&MessageFlagEphemeral|MessageFlagLoading, true
		} else {
			fillMessage(&nm, req.Data)
			if nm.Attachments, err = saveFiles(ctx, nil, in.ChannelID, req.Data.Attachments); err != nil {
				return callbackResponse{}, err
			}
		}
		m, err := h.deps.Messages.CreateMessage(ctx, nm)
		if err != nil {
			return callbackResponse{}, fmt.Errorf("interaction response message: %w", err)
		}
		msg = &m
	case CallbackUpdateMessage:
		if in.MessageID == 0 {
			return callbackResponse{}, FormError("type", "INTERACTION_RESPONSE_TYPE_INVALID", "This interaction has no message to update.")
		}
		m, err := h.deps.Messages.EditMessage(ctx, MessageEdit{
			ChannelID: in.ChannelID, MessageID: in.MessageID, Content: req.Data.Content,
			Embeds: req.Data.Embeds, Components: req.Data.Components, AllowedMentions: req.Data.AllowedMentions,
		})
		if err != nil {
			return callbackResponse{}, fmt.Errorf("interaction message update: %w", err)
		}
		msg = &m
	case CallbackAutocompleteResult:
		p, _ := json.Marshal(map[string]any{"choices": *req.Data.Choices, "nonce": in.ID.String()})
		h.deps.Dispatcher.DeliverToUser(ctx, in.UserID, 0, "APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE", p)
	case CallbackModal:
		p, _ := json.Marshal(map[string]any{
			"id": in.ID, "application": map[string]any{"id": in.ApplicationID}, "channel_id": in.ChannelID,
			"custom_id": req.Data.CustomID, "title": req.Data.Title, "components": *req.Data.Components,
		})
		h.deps.Dispatcher.DeliverToUser(ctx, in.UserID, 0, "INTERACTION_MODAL_CREATE", p)
	}

	in, err = h.deps.Store.UpdateInteraction(ctx, id, func(s *Interaction) error {
		if s.State != StatePending {
			return ErrAlreadyAcknowledged
		}
		s.State, s.CallbackType = StateAcknowledged, req.Type
		switch {
		case msg != nil && req.Type != CallbackUpdateMessage:
			s.ResponseMessageID, s.Loading, s.Ephemeral = msg.ID, loading, ephemeral
		case s.MessageID != 0:
			s.ResponseMessageID = s.MessageID
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrAlreadyAcknowledged) {
			return callbackResponse{}, err
		}
		return callbackResponse{}, fmt.Errorf("%w: acknowledge interaction: %w", ErrUnavailable, err)
	}
	h.disarm(id)
	if in.ResponseMessageID != 0 {
		mid, l, e := in.ResponseMessageID, in.Loading, in.Ephemeral
		res.Interaction.ResponseMessageID, res.Interaction.ResponseMessageLoading, res.Interaction.ResponseMessageEphemeral = &mid, &l, &e
	}
	res.Resource = &callbackResource{Type: req.Type, Message: msg}
	return res, nil
}

// fillMessage copies a body's content into a new message.
func fillMessage(nm *NewMessage, d messageData) {
	nm.AllowedMentions = d.AllowedMentions
	if d.Content != nil {
		nm.Content = *d.Content
	}
	if d.Embeds != nil {
		nm.Embeds = *d.Embeds
	}
	if d.Components != nil {
		nm.Components = *d.Components
	}
}
