package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// maxContent is Discord's content limit in characters.
const maxContent = 2000

type messageReferenceRequest struct {
	Type            int    `json:"type"`
	MessageID       *reqID `json:"message_id"`
	ChannelID       *reqID `json:"channel_id"`
	GuildID         *reqID `json:"guild_id"`
	FailIfNotExists *bool  `json:"fail_if_not_exists"`
}

type createMessageRequest struct {
	Content          string                   `json:"content"`
	Nonce            json.RawMessage          `json:"nonce"`
	TTS              bool                     `json:"tts"`
	EnforceNonce     bool                     `json:"enforce_nonce"`
	Embeds           []json.RawMessage        `json:"embeds"`
	Components       []json.RawMessage        `json:"components"`
	StickerIDs       []reqID                  `json:"sticker_ids"`
	AllowedMentions  *allowedMentions         `json:"allowed_mentions"`
	MessageReference *messageReferenceRequest `json:"message_reference"`
	Flags            int                      `json:"flags"`
	Attachments      []attachmentRef          `json:"attachments"`

	// files are the uploads of a multipart body (attachments.go).
	files uploads.Files
	// nonce is the validated nonce as stored: a string, or '#' and the
	// digits of an integer nonce.
	nonce string
}

// decodeCreateMessage decodes and validates a POST /channels/{id}/messages
// body.
func decodeCreateMessage(body []byte, files ...uploads.File) (createMessageRequest, error) {
	var req createMessageRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	req.files = files
	if utf8.RuneCountInString(req.Content) > maxContent {
		return req, formError("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	}
	if err := checkRich(&req.Embeds, &req.Components, req.StickerIDs, req.AllowedMentions); err != nil {
		return req, err
	}
	nonce, err := decodeNonce(req.Nonce)
	if err != nil {
		return req, err
	}
	req.nonce = nonce
	if req.MessageReference != nil && req.MessageReference.MessageID == nil {
		return req, formError("message_reference.message_id", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if strings.TrimSpace(req.Content) == "" && len(req.Embeds) == 0 && len(req.Components) == 0 && len(files) == 0 {
		return req, errEmptyMessage
	}
	return req, nil
}

// decodeNonce accepts an integer or a string of at most 25 characters.
func decodeNonce(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", formError("nonce", "BASE_TYPE_STRING", "Must be a string.")
		}
		if utf8.RuneCountInString(s) > 25 {
			return "", formError("nonce", "BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
		}
		return s, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", formError("nonce", "NONCE_TYPE_INVALID", "Nonce must be an integer or a string of 25 or fewer characters.")
	}
	return "#" + strconv.FormatInt(n, 10), nil
}

func (h *messageHandler) createMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	body, files, err := h.readMessagePayload(w, r)
	if err != nil {
		return err
	}
	req, err := decodeCreateMessage(body, files...)
	if err != nil {
		return err
	}
	ctx := r.Context()
	rd := h.reader(user)
	var msg wire.Message
	if req.EnforceNonce && req.nonce != "" {
		for {
			e, mine := h.nonces.reserve(user, channelID, req.nonce)
			if mine {
				if id, ok := h.sentBefore(r, user, channelID, req.nonce); ok {
					h.nonces.finish(user, channelID, req.nonce, id)
					out, err := rd.load(ctx, channelID, id)
					if err != nil {
						return err
					}
					// The process that wrote it may have died between the
					// store write and its event: log the event again
					// (consumers count a message id once), so its mentions
					// are counted. It is not fanned out again: sessions
					// may have had it.
					bg, cancel := background(ctx)
					h.logMessage(bg, eventlog.MessageCreate, out)
					cancel()
					writeJSON(w, http.StatusOK, out)
					return nil
				}
				msg, err = h.send(ctx, rd, user, channelID, req)
				id := msg.ID
				if err != nil {
					id = 0
				}
				h.nonces.finish(user, channelID, req.nonce, id)
				break
			}
			select {
			case <-e.done:
			case <-ctx.Done():
				return errors.Join(guild.ErrUnavailable, ctx.Err())
			}
			if e.message == 0 {
				continue // the first send failed: try ours
			}
			// The replay answers with the stored message as the caller may
			// see it now: the nonce is scoped to this channel, and the
			// reader decides visibility again (a channel lost since the
			// first send is 403, an edit made since is what is shown).
			out, err := rd.load(ctx, channelID, e.message)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, out)
			return nil
		}
	} else {
		msg, err = h.send(ctx, rd, user, channelID, req)
	}
	if err != nil {
		return err
	}
	// The message is stored with its event and fanned out: a sender's
	// next message reaches the actor after this one, so sessions see each
	// sender's messages in send order.
	writeJSON(w, http.StatusOK, msg)
	return nil
}

// sentBefore asks Deps.PriorSend for a message an earlier attempt of
// this send wrote on another process.
func (h *messageHandler) sentBefore(r *http.Request, user, channelID snowflake.ID, nonce string) (snowflake.ID, bool) {
	if h.priorSend == nil {
		return 0, false
	}
	return h.priorSend(r, channelID, user, nonce)
}

// send asks the guild service to write the message: parse the mentions,
// load the replied-to message, store the files, then one call into the
// guild's actor authorises the send (permissions, slowmode), mints the
// id, writes the message with its MESSAGE_CREATE event and fans it out,
// rendered by rd.
func (h *messageHandler) send(ctx context.Context, rd *reader, user, channelID snowflake.ID, req createMessageRequest) (wire.Message, error) {
	mentions := parseMentions(req.Content, req.AllowedMentions)
	var ref *store.Message
	if mr := req.MessageReference; mr != nil {
		if mr.ChannelID != nil && snowflake.ID(*mr.ChannelID) != channelID {
			return wire.Message{}, formError("message_reference", "REPLIES_CANNOT_REFERENCE_OTHER_CHANNEL", "Cannot reply to a message in a different channel.")
		}
		// Check access before revealing whether the message exists.
		if _, err := rd.access(ctx, channelID); err != nil {
			return wire.Message{}, err
		}
		m, err := h.store.GetMessage(ctx, channelID, snowflake.ID(*mr.MessageID))
		switch {
		case err == nil:
			ref = &m
			if (req.AllowedMentions == nil || req.AllowedMentions.RepliedUser) && !slices.Contains(mentions.Users, m.AuthorID) {
				mentions.Users = append(mentions.Users, m.AuthorID)
			}
		case errors.Is(err, store.ErrNotFound):
			if mr.FailIfNotExists == nil || *mr.FailIfNotExists {
				return wire.Message{}, formError("message_reference", "REPLIES_UNKNOWN_MESSAGE", "Unknown message")
			}
		default:
			return wire.Message{}, errors.Join(guild.ErrUnavailable, err)
		}
	}
	m := store.Message{
		ChannelID: channelID, AuthorID: user, Content: req.Content, Type: wire.MessageDefault, TTS: req.TTS,
		Nonce: req.nonce, Flags: sendFlags(req.Flags), Embeds: wire.JoinRaw(req.Embeds), Components: wire.JoinRaw(req.Components),
	}
	if ref != nil {
		m.Type = wire.MessageReply
		m.ReferenceID = ref.ID
		if _, err := rd.prepare(ctx, m, ref); err != nil {
			return wire.Message{}, err
		}
	}
	// The files are stored before the write that names them, and deleted
	// again when the send is refused.
	atts, err := h.saveAttachments(ctx, channelID, req.Attachments, req.files)
	if err != nil {
		return wire.Message{}, err
	}
	m.Attachments = atts
	written, err := h.writeMessage(ctx, true, guild.MessageWrite{
		Check: guild.CheckSend, UserID: user, Message: m, Attachments: len(req.files) > 0,
		Mentions: &guild.Mentions{Everyone: mentions.Everyone, Users: mentions.Users, Roles: mentions.Roles},
		Render:   rd.written(ref, true),
	}, atts, nil)
	return written.Wire, err
}

// userOrGhost renders a user, or Discord's "Deleted User" for one that
// is gone.
func (p *people) userOrGhost(ctx context.Context, id snowflake.ID) wire.User {
	if u, err := p.guilds.User(ctx, id); err == nil {
		return u
	}
	return wire.User{ID: id, Username: "Deleted User", Discriminator: "0"}
}

func messageErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errUnknownMessage
	}
	return errors.Join(guild.ErrUnavailable, err)
}
