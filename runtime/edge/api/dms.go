package api

import (
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// DMs and group DMs. Opening one, like sending in a DM, is allowed only
// between users who share a guild (the guild tier's DM policy); anything
// else is 50007 "Cannot send messages to this user".

type createDMRequest struct {
	RecipientID  *reqID   `json:"recipient_id"`
	Recipients   []reqID  `json:"recipients"`
	AccessTokens []string `json:"access_tokens"`
}

func (h *accountHandler) createDM(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	var req createDMRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	var c store.Channel
	var err error
	switch {
	case req.RecipientID != nil:
		c, err = h.guilds.Private.CreateDM(r.Context(), user, snowflake.ID(*req.RecipientID))
	case len(req.Recipients) == 1:
		c, err = h.guilds.Private.CreateDM(r.Context(), user, snowflake.ID(req.Recipients[0]))
	case len(req.Recipients) > 1:
		if len(req.Recipients) > 9 {
			return formError("recipients", "BASE_TYPE_MAX_LENGTH", "Must be 9 or fewer in length.")
		}
		c, err = h.guilds.Private.CreateGroupDM(r.Context(), user, ids(req.Recipients))
	default:
		return formError("recipient_id", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.guilds.Private.WireChannel(r.Context(), c, user))
	return nil
}
