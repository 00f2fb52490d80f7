package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

var errMaxPins = &apiError{Status: http.StatusBadRequest, Code: 30003, Message: "Maximum number of pins reached (50)"}

// Audit log action types of pins.
const (
	auditMessagePin   = 74
	auditMessageUnpin = 75
)

// pinMessage is PUT /channels/{c}/messages/pins/{m} (and the legacy
// PUT /channels/{c}/pins/{m}).
func (h *pinHandler) pinMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.setPin(w, r, user, true)
}

// unpinMessage is DELETE /channels/{c}/messages/pins/{m} (and legacy).
func (h *pinHandler) unpinMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.setPin(w, r, user, false)
}

// setPin pins or unpins: one call into the guild's actor checks
// PIN_MESSAGES (or MANAGE_MESSAGES, which Discord still honours), reads
// the message, refuses an archived thread's pins and the 51st pin, writes
// the pin with the message's pinned flag and sends CHANNEL_PINS_UPDATE.
func (h *pinHandler) setPin(w http.ResponseWriter, r *http.Request, user snowflake.ID, pin bool) error {
	channelID, messageID, err := messagePath(r)
	if err != nil {
		return err
	}
	m, changed, err := h.messages.Pin(r.Context(), user, channelID, messageID, pin)
	switch {
	case errors.Is(err, guild.ErrMaxPins):
		return errMaxPins
	case err != nil:
		return writeErr(err)
	}
	if changed {
		action := auditMessageUnpin
		if pin {
			action = auditMessagePin
		}
		h.recordAudit(r, m.GuildID, user, auditEntry{Action: action, Target: m.AuthorID,
			Options: map[string]any{"channel_id": m.ChannelID, "message_id": m.ID}})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type pinEntry struct {
	PinnedAt wire.Timestamp `json:"pinned_at"`
	Message  wire.Message   `json:"message"`
}

// pinned lists the channel's pins the viewer may read, most recent
// first, pinned before before (zero: no bound), at most limit, and reports
// whether more remain. Without READ_MESSAGE_HISTORY the list is empty.
func (h *pinHandler) pinned(r *http.Request, user snowflake.ID, before time.Time, limit int) ([]pinEntry, bool, error) {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return nil, false, err
	}
	ctx := r.Context()
	rd := h.reader(user)
	grant, err := rd.history(ctx, channelID)
	if err != nil {
		return nil, false, err
	}
	out := []pinEntry{}
	if !grant.History {
		return out, false, nil
	}
	pins, err := h.store.ListPins(ctx, channelID)
	if err != nil {
		return nil, false, errors.Join(guild.ErrUnavailable, err)
	}
	more := false
	for _, p := range pins {
		if !before.IsZero() && !p.PinnedAt.Before(before) {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		m, err := h.store.GetMessage(ctx, channelID, p.MessageID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, errors.Join(guild.ErrUnavailable, err)
		}
		wm, err := rd.render(ctx, m, nil, nil)
		if err != nil {
			return nil, false, err
		}
		out = append(out, pinEntry{PinnedAt: wire.Timestamp(p.PinnedAt), Message: wm})
	}
	msgs := make([]wire.Message, len(out))
	for i := range out {
		msgs[i] = out[i].Message
	}
	if err := h.withReactions(ctx, user, channelID, msgs); err != nil {
		return nil, false, err
	}
	for i := range out {
		out[i].Message = msgs[i]
	}
	return out, more, nil
}

// listPins is GET /channels/{c}/messages/pins?before=<ISO8601>&limit=1..50.
func (h *pinHandler) listPins(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	limit, err := queryInt(r, "limit", guild.MaxPins, 1, guild.MaxPins)
	if err != nil {
		return err
	}
	var before time.Time
	if s := r.URL.Query().Get("before"); s != "" {
		var ts wire.Timestamp
		if err := ts.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
			return formError("before", "DATE_TYPE_PARSE", "Could not parse "+truncate(s, 40)+". Should be ISO8601.")
		}
		before = ts.Time()
	}
	items, more, err := h.pinned(r, user, before, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "has_more": more})
	return nil
}

// listPinsLegacy is GET /channels/{c}/pins: the pinned messages as an array.
func (h *pinHandler) listPinsLegacy(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	items, _, err := h.pinned(r, user, time.Time{}, guild.MaxPins)
	if err != nil {
		return err
	}
	out := make([]wire.Message, 0, len(items))
	for _, it := range items {
		out = append(out, it.Message)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
