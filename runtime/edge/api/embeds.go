package api

import (
	"encoding/json"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/domain/rich"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Message flags a client may set on a channel message; the others are
// Discord's to set (ephemeral only applies to interaction responses) and
// are dropped, as Discord drops them.
const (
	flagSuppressEmbeds        = 1 << 2
	flagSuppressNotifications = 1 << 12
	sendableFlags             = flagSuppressEmbeds | flagSuppressNotifications
)

// errInvalidSticker refuses sticker_ids: Concord has no stickers, so no
// sticker id can name one (Discord's 50081 Invalid Sticker Sent).
var errInvalidSticker = &apiError{Status: http.StatusBadRequest, Code: 50081, Message: "Invalid Sticker Sent: Concord has no stickers"}

// checkRich validates the parts of a message body beyond its content:
// embeds and components are checked against Discord's limits and replaced
// by their normalised form, sticker_ids are refused and allowed_mentions
// must be well formed. Both the send and the edit path call it.
func checkRich(embeds, components *[]json.RawMessage, stickers []reqID, am *allowedMentions) error {
	if len(stickers) > 0 {
		return errInvalidSticker
	}
	if embeds != nil && *embeds != nil {
		out, err := rich.Embeds("embeds", *embeds)
		if err != nil {
			return err
		}
		*embeds = out
	}
	if components != nil && *components != nil {
		out, err := rich.Components("components", *components, false)
		if err != nil {
			return err
		}
		*components = out
	}
	return checkAllowedMentions(am)
}

func checkAllowedMentions(am *allowedMentions) error {
	if p := am.allowed().Check(); p != nil {
		return formError(p.Field, p.Code, p.Message)
	}
	return nil
}

// sendFlags keeps the flags a client may set.
func sendFlags(f int) int { return f & sendableFlags }

// applyRichEdit sets the embeds and components an edit carries (null or
// [] clears them); absent fields stay.
func applyRichEdit(m *store.Message, embeds, components nullable[[]json.RawMessage]) {
	if embeds.Set {
		m.Embeds = wire.JoinRaw(embeds.Value)
	}
	if components.Set {
		m.Components = wire.JoinRaw(components.Value)
	}
}
