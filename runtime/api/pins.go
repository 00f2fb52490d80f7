package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/permissions"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/wire"
)

// maxPins is Discord's limit of pinned messages per channel.
const maxPins = 50

var errMaxPins = &apiError{Status: http.StatusBadRequest, Code: 30003, Message: "Maximum number of pins reached (50)"}

// Audit log action types of pins.
const (
	auditMessagePin   = 74
	auditMessageUnpin = 75
)

// pinTarget decides visibility and PIN_MESSAGES (or MANAGE_MESSAGES, which
// Discord still honours) and loads the message; an archived thread's
// pins do not change.
func (h *handler) pinTarget(r *http.Request, user snowflake.ID) (guild.ReadView, store.Message, error) {
	channelID, messageID, err := h.messagePath(r)
	if err != nil {
		return guild.ReadView{}, store.Message{}, err
	}
	ctx := r.Context()
	v, err := h.guilds.Visibility(ctx, user, channelID)
	if err != nil {
		return v, store.Message{}, err
	}
	if v.Channel.GuildID != 0 && !v.Permissions.Has(permissions.PinMessages) && !v.Permissions.Has(permissions.ManageMessages) {
		return v, store.Message{}, guild.ErrMissingPermissions
	}
	m, err := h.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return v, store.Message{}, messageErr(err)
	}
	if err := frozenThread(v.Channel); err != nil {
		return v, store.Message{}, err
	}
	return v, m, nil
}

// pinMessage is PUT /channels/{c}/messages/pins/{m} (and the legacy
// PUT /channels/{c}/pins/{m}).
func (h *handler) pinMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	v, m, err := h.pinTarget(r, user)
	if err != nil {
		return err
	}
	ctx := r.Context()
	pins, err := h.store.ListPins(ctx, m.ChannelID)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if len(pins) >= maxPins {
		for _, p := range pins {
			if p.MessageID == m.ID {
				w.WriteHeader(http.StatusNoContent)
				return nil
			}
		}
		return errMaxPins
	}
	now := h.cfg.Now()
	added, err := h.store.PinMessage(ctx, m.ChannelID, m.ID, now)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if added {
		if err := h.setPinned(ctx, m, true); err != nil {
			return err
		}
		ts := wire.Timestamp(now)
		h.publishChannel(ctx, v.Channel, "CHANNEL_PINS_UPDATE", wire.ChannelPinsUpdate{GuildID: v.Channel.GuildID, ChannelID: m.ChannelID, LastPinTimestamp: &ts})
		h.recordAudit(r, v.Channel.GuildID, user, auditEntry{Action: auditMessagePin, Target: m.AuthorID,
			Options: map[string]any{"channel_id": m.ChannelID, "message_id": m.ID}})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// unpinMessage is DELETE /channels/{c}/messages/pins/{m} (and legacy).
func (h *handler) unpinMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	v, m, err := h.pinTarget(r, user)
	if err != nil {
		return err
	}
	ctx := r.Context()
	removed, err := h.store.UnpinMessage(ctx, m.ChannelID, m.ID)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if removed {
		if err := h.setPinned(ctx, m, false); err != nil {
			return err
		}
		ev := wire.ChannelPinsUpdate{GuildID: v.Channel.GuildID, ChannelID: m.ChannelID}
		if pins, err := h.store.ListPins(ctx, m.ChannelID); err == nil && len(pins) > 0 {
			ts := wire.Timestamp(pins[0].PinnedAt)
			ev.LastPinTimestamp = &ts
		}
		h.publishChannel(ctx, v.Channel, "CHANNEL_PINS_UPDATE", ev)
		h.recordAudit(r, v.Channel.GuildID, user, auditEntry{Action: auditMessageUnpin, Target: m.AuthorID,
			Options: map[string]any{"channel_id": m.ChannelID, "message_id": m.ID}})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setPinned keeps the message's pinned flag in step with the pin list.
func (h *handler) setPinned(ctx context.Context, m store.Message, pinned bool) error {
	cur, err := h.store.GetMessage(ctx, m.ChannelID, m.ID)
	if err != nil {
		return messageErr(err)
	}
	cur.Pinned = pinned
	if err := h.store.PutMessage(ctx, cur); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	return nil
}

type pinEntry struct {
	PinnedAt wire.Timestamp `json:"pinned_at"`
	Message  wire.Message   `json:"message"`
}

// pinned lists the channel's pins the viewer may read, most recent
// first, pinned before before (zero: no bound), at most limit, and reports
// whether more remain. Without READ_MESSAGE_HISTORY the list is empty.
func (h *handler) pinned(r *http.Request, user snowflake.ID, before time.Time, limit int) ([]pinEntry, bool, error) {
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
func (h *handler) listPins(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	limit, err := queryInt(r, "limit", maxPins, 1, maxPins)
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
func (h *handler) listPinsLegacy(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	items, _, err := h.pinned(r, user, time.Time{}, maxPins)
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
