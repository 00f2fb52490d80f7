package api

import (
	"errors"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

func (h *messageHandler) listMessages(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 50, 1, 100)
	if err != nil {
		return err
	}
	var q store.HistoryQuery
	q.Limit = limit
	for _, c := range []struct {
		name string
		dst  *snowflake.ID
	}{{"around", &q.Around}, {"before", &q.Before}, {"after", &q.After}} {
		id, err := queryID(r, c.name)
		if err != nil {
			return err
		}
		if id != 0 && q.Around == 0 && q.Before == 0 && q.After == 0 {
			*c.dst = id
		}
	}
	rd := h.reader(user)
	grant, err := rd.history(r.Context(), channelID)
	if err != nil {
		return err
	}
	out := []wire.Message{}
	if grant.History {
		ms, err := h.store.ListMessages(r.Context(), channelID, q)
		if err != nil {
			return errors.Join(guild.ErrUnavailable, err)
		}
		for _, m := range ms {
			wm, err := rd.render(r.Context(), m, nil, nil)
			if err != nil {
				return err
			}
			out = append(out, wm)
		}
		if err := h.withReactions(r.Context(), user, channelID, out); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// messagePath parses {channel} and {message}.
func messagePath(r *http.Request) (snowflake.ID, snowflake.ID, error) {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return 0, 0, err
	}
	messageID, err := pathID(r, "message", errUnknownMessage)
	return channelID, messageID, err
}

func (h *messageHandler) getMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, messageID, err := messagePath(r)
	if err != nil {
		return err
	}
	rd := h.reader(user)
	grant, err := rd.history(r.Context(), channelID)
	if err != nil {
		return err
	}
	if !grant.History {
		return guild.ErrMissingPermissions
	}
	out, err := rd.load(r.Context(), channelID, messageID)
	if err != nil {
		return err
	}
	one := []wire.Message{out}
	if err := h.withReactions(r.Context(), user, channelID, one); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, one[0])
	return nil
}
