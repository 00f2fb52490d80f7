package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
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

// Webhooks.
//
// A webhook belongs to one channel of a guild. Managing webhooks goes
// through guild.Channels.AuthorizeWebhooks — the visibility decision for
// the channel, then MANAGE_WEBHOOKS through the grant check — so a
// channel the caller cannot see is 50001 and its webhooks are never
// named. The token is 48 random bytes (base64url); only its SHA-256 is
// stored, so it is shown once, in the creation response, as Discord's
// own token is shown only to its creator. Token routes
// (/webhooks/{id}/{token}...) need no Authorization: the token is the
// credential, compared in constant time against the stored hash, and a
// wrong token is 50027 whatever the webhook.

// Limits Discord applies to webhooks.
const (
	maxChannelWebhooks = 15
	maxWebhookName     = 80
)

// Audit log action types of webhooks.
const (
	auditWebhookCreate = 50
	auditWebhookUpdate = 51
	auditWebhookDelete = 52
)

var (
	errUnknownWebhook      = &apiError{Status: http.StatusNotFound, Code: 10015, Message: "Unknown Webhook"}
	errInvalidWebhookToken = &apiError{Status: http.StatusUnauthorized, Code: 50027, Message: "Invalid Webhook Token"}
	errMaxWebhooks         = &apiError{Status: http.StatusBadRequest, Code: 30007, Message: "Maximum number of webhooks reached (15)"}
)

// webhookObject is Discord's webhook object.
type webhookObject struct {
	ID            snowflake.ID  `json:"id"`
	Type          int           `json:"type"`
	GuildID       snowflake.ID  `json:"guild_id"`
	ChannelID     snowflake.ID  `json:"channel_id"`
	User          *wire.User    `json:"user,omitempty"`
	Name          *string       `json:"name"`
	Avatar        *string       `json:"avatar"`
	ApplicationID *snowflake.ID `json:"application_id"`
	Token         string        `json:"token,omitempty"`
	URL           string        `json:"url,omitempty"`
}

// webhookJSON renders a webhook; withUser adds its creator (the
// authenticated routes), token is set only right after creation.
func (h *webhookHandler) webhookJSON(r *http.Request, wh store.Webhook, withUser bool, token string) webhookObject {
	name := wh.Name
	out := webhookObject{ID: wh.ID, Type: wh.Type, GuildID: wh.GuildID, ChannelID: wh.ChannelID, Name: &name}
	if wh.Avatar != "" {
		av := wh.Avatar
		out.Avatar = &av
	}
	if withUser && wh.CreatorID != 0 {
		u := h.userOrGhost(r.Context(), wh.CreatorID)
		out.User = &u
	}
	if token != "" {
		out.Token = token
		out.URL = requestBase(r) + "/api/webhooks/" + wh.ID.String() + "/" + token
	}
	return out
}

// requestBase is the scheme and host the request came in on.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func hashWebhookToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func newWebhookToken() (string, error) {
	var b [48]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

type webhookRequest struct {
	Name      nullable[string] `json:"name"`
	Avatar    nullable[string] `json:"avatar"`
	ChannelID *reqID           `json:"channel_id"`
}

// checkWebhookName applies Discord's name rules: 1..80 characters, not
// containing "clyde" or "discord".
func checkWebhookName(field, name string) error {
	n := utf8.RuneCountInString(name)
	if n < 1 || n > maxWebhookName {
		return formError(field, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 80 in length.")
	}
	low := strings.ToLower(name)
	if strings.Contains(low, "clyde") || strings.Contains(low, "discord") {
		return formError(field, "WEBHOOK_INVALID_USERNAME", "Username cannot contain \"clyde\" or \"discord\"")
	}
	return nil
}

// avatarHash validates an image data URI and returns the hash naming it.
// Concord keeps the hash, not the image: avatars are not served yet.
func avatarHash(field, data string) (string, error) {
	rest, ok := strings.CutPrefix(data, "data:")
	mediaType, payload, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 || !strings.HasPrefix(mediaType, "image/") {
		return "", formError(field, "IMAGE_INVALID", "Invalid image data")
	}
	raw, err := base64.StdEncoding.DecodeString(payload)
	if err != nil || len(raw) == 0 {
		return "", formError(field, "IMAGE_INVALID", "Invalid image data")
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16]), nil
}

// createWebhook is POST /channels/{c}/webhooks.
func (h *webhookHandler) createWebhook(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	var req webhookRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if !req.Name.Set || req.Name.Null {
		return formError("name", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if err := checkWebhookName("name", req.Name.Value); err != nil {
		return err
	}
	var avatar string
	if req.Avatar.Set && !req.Avatar.Null {
		if avatar, err = avatarHash("avatar", req.Avatar.Value); err != nil {
			return err
		}
	}
	ctx := r.Context()
	c, err := h.channels.AuthorizeWebhooks(ctx, user, channelID)
	if err != nil {
		return err
	}
	all, err := h.store.GuildWebhooks(ctx, c.GuildID)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	n := 0
	for _, wh := range all {
		if wh.ChannelID == channelID {
			n++
		}
	}
	if n >= maxChannelWebhooks {
		return errMaxWebhooks
	}
	id, err := h.ids.Next()
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	token, err := newWebhookToken()
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	wh := store.Webhook{ID: id, GuildID: c.GuildID, ChannelID: channelID, CreatorID: user, Type: store.WebhookIncoming,
		Name: req.Name.Value, Avatar: avatar, TokenHash: hashWebhookToken(token), CreatedAt: h.now()}
	if err := h.store.PutWebhook(ctx, wh); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	h.webhooksChanged(r, wh.GuildID, channelID)
	h.recordAudit(r, wh.GuildID, user, auditEntry{Action: auditWebhookCreate, Target: wh.ID, Changes: []auditChange{
		change("name", nil, wh.Name), change("channel_id", nil, channelID.String()), change("type", nil, wh.Type)}})
	writeJSON(w, http.StatusOK, h.webhookJSON(r, wh, true, token))
	return nil
}

// webhooksChanged sends WEBHOOKS_UPDATE for a channel.
func (h *webhookHandler) webhooksChanged(r *http.Request, guildID, channelID snowflake.ID) {
	bg, cancel := background(r.Context())
	defer cancel()
	if err := h.channels.PublishWebhooksUpdate(bg, guildID, channelID); err != nil {
		h.log.Warn("WEBHOOKS_UPDATE not published", "channel_id", channelID, "err", err)
	}
}

// channelWebhooks is GET /channels/{c}/webhooks.
func (h *webhookHandler) channelWebhooks(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	ctx := r.Context()
	c, err := h.channels.AuthorizeWebhooks(ctx, user, channelID)
	if err != nil {
		return err
	}
	all, err := h.store.GuildWebhooks(ctx, c.GuildID)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	out := []webhookObject{}
	for _, wh := range all {
		if wh.ChannelID == channelID {
			out = append(out, h.webhookJSON(r, wh, true, ""))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// guildWebhooks is GET /guilds/{g}/webhooks: the webhooks of the channels
// the caller sees and may manage webhooks in.
func (h *webhookHandler) guildWebhooks(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	guildID, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	ctx := r.Context()
	allowed, err := h.channels.WebhookChannels(ctx, user, guildID)
	if err != nil {
		return err
	}
	all, err := h.store.GuildWebhooks(ctx, guildID)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	out := []webhookObject{}
	for _, wh := range all {
		if allowed[wh.ChannelID] {
			out = append(out, h.webhookJSON(r, wh, true, ""))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// managedWebhook loads {webhook} for a caller who may manage it: a
// webhook whose channel the caller cannot see is 10015, as if it did not
// exist, so its id reveals nothing.
func (h *webhookHandler) managedWebhook(r *http.Request, user snowflake.ID) (store.Webhook, error) {
	id, err := pathID(r, "webhook", errUnknownWebhook)
	if err != nil {
		return store.Webhook{}, err
	}
	ctx := r.Context()
	wh, err := h.store.GetWebhook(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Webhook{}, errUnknownWebhook
	}
	if err != nil {
		return store.Webhook{}, errors.Join(guild.ErrUnavailable, err)
	}
	if _, err := h.channels.AuthorizeWebhooks(ctx, user, wh.ChannelID); err != nil {
		if errors.Is(err, guild.ErrMissingAccess) || errors.Is(err, guild.ErrUnknownChannel) {
			return store.Webhook{}, errUnknownWebhook
		}
		return store.Webhook{}, err
	}
	return wh, nil
}

// tokenWebhook loads {webhook} from st and checks {token}.
func tokenWebhook(r *http.Request, st store.Store) (store.Webhook, error) {
	id, err := pathID(r, "webhook", errUnknownWebhook)
	if err != nil {
		return store.Webhook{}, err
	}
	wh, err := st.GetWebhook(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Webhook{}, errUnknownWebhook
	}
	if err != nil {
		return store.Webhook{}, errors.Join(guild.ErrUnavailable, err)
	}
	if subtle.ConstantTimeCompare(hashWebhookToken(r.PathValue("token")), wh.TokenHash) != 1 {
		return store.Webhook{}, errInvalidWebhookToken
	}
	return wh, nil
}

func (h *webhookHandler) getWebhook(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	wh, err := h.managedWebhook(r, user)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.webhookJSON(r, wh, true, ""))
	return nil
}

func (h *webhookHandler) getWebhookByToken(w http.ResponseWriter, r *http.Request) error {
	wh, err := tokenWebhook(r, h.store)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.webhookJSON(r, wh, false, ""))
	return nil
}

// applyWebhookPatch applies name and avatar, collecting audit changes.
func applyWebhookPatch(wh *store.Webhook, req webhookRequest) ([]auditChange, error) {
	var changes []auditChange
	if req.Name.Set {
		if req.Name.Null {
			return nil, formError("name", "BASE_TYPE_REQUIRED", "This field is required")
		}
		if err := checkWebhookName("name", req.Name.Value); err != nil {
			return nil, err
		}
		if req.Name.Value != wh.Name {
			changes = append(changes, change("name", wh.Name, req.Name.Value))
			wh.Name = req.Name.Value
		}
	}
	if req.Avatar.Set {
		av := ""
		if !req.Avatar.Null {
			var err error
			if av, err = avatarHash("avatar", req.Avatar.Value); err != nil {
				return nil, err
			}
		}
		if av != wh.Avatar {
			changes = append(changes, change("avatar_hash", wh.Avatar, av))
			wh.Avatar = av
		}
	}
	return changes, nil
}

// modifyWebhook is PATCH /webhooks/{id}: name, avatar and channel_id (the
// new channel needs MANAGE_WEBHOOKS too, through the same decision).
func (h *webhookHandler) modifyWebhook(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	var req webhookRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	wh, err := h.managedWebhook(r, user)
	if err != nil {
		return err
	}
	changes, err := applyWebhookPatch(&wh, req)
	if err != nil {
		return err
	}
	ctx := r.Context()
	old := wh.ChannelID
	if req.ChannelID != nil && snowflake.ID(*req.ChannelID) != wh.ChannelID {
		to := snowflake.ID(*req.ChannelID)
		c, err := h.channels.AuthorizeWebhooks(ctx, user, to)
		if err != nil {
			return err
		}
		if c.GuildID != wh.GuildID {
			return formError("channel_id", "WEBHOOK_CHANNEL_GUILD", "Webhooks can only be moved to channels in the same guild.")
		}
		changes = append(changes, change("channel_id", old.String(), to.String()))
		wh.ChannelID = to
	}
	if err := h.store.PutWebhook(ctx, wh); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	h.webhooksChanged(r, wh.GuildID, wh.ChannelID)
	if old != wh.ChannelID {
		h.webhooksChanged(r, wh.GuildID, old)
	}
	if len(changes) > 0 {
		h.recordAudit(r, wh.GuildID, user, auditEntry{Action: auditWebhookUpdate, Target: wh.ID, Changes: changes})
	}
	writeJSON(w, http.StatusOK, h.webhookJSON(r, wh, true, ""))
	return nil
}

// modifyWebhookByToken is PATCH /webhooks/{id}/{token}: name and avatar
// only (channel_id is refused).
func (h *webhookHandler) modifyWebhookByToken(w http.ResponseWriter, r *http.Request) error {
	var req webhookRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	wh, err := tokenWebhook(r, h.store)
	if err != nil {
		return err
	}
	if req.ChannelID != nil {
		return formError("channel_id", "WEBHOOK_TOKEN_CHANNEL", "A webhook cannot be moved with its token.")
	}
	changes, err := applyWebhookPatch(&wh, req)
	if err != nil {
		return err
	}
	if err := h.store.PutWebhook(r.Context(), wh); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	h.webhooksChanged(r, wh.GuildID, wh.ChannelID)
	if len(changes) > 0 {
		h.recordAudit(r, wh.GuildID, 0, auditEntry{Action: auditWebhookUpdate, Target: wh.ID, Changes: changes})
	}
	writeJSON(w, http.StatusOK, h.webhookJSON(r, wh, false, ""))
	return nil
}

func (h *webhookHandler) removeWebhook(w http.ResponseWriter, r *http.Request, wh store.Webhook, user snowflake.ID) error {
	if err := h.store.DeleteWebhook(r.Context(), wh.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errUnknownWebhook
		}
		return errors.Join(guild.ErrUnavailable, err)
	}
	h.webhooksChanged(r, wh.GuildID, wh.ChannelID)
	h.recordAudit(r, wh.GuildID, user, auditEntry{Action: auditWebhookDelete, Target: wh.ID, Changes: []auditChange{
		change("name", wh.Name, nil), change("channel_id", wh.ChannelID.String(), nil), change("type", wh.Type, nil)}})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *webhookHandler) deleteWebhook(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	wh, err := h.managedWebhook(r, user)
	if err != nil {
		return err
	}
	return h.removeWebhook(w, r, wh, user)
}

func (h *webhookHandler) deleteWebhookByToken(w http.ResponseWriter, r *http.Request) error {
	wh, err := tokenWebhook(r, h.store)
	if err != nil {
		return err
	}
	return h.removeWebhook(w, r, wh, 0)
}

// change is one audit log change; a nil side is left out.
func change(key string, old, new any) auditChange {
	c := auditChange{Key: key}
	if old != nil {
		c.OldValue, _ = json.Marshal(old)
	}
	if new != nil {
		c.NewValue, _ = json.Marshal(new)
	}
	return c
}

// dropWebhooks deletes the webhooks of a deleted channel (or, with
// channelID 0, of a deleted guild), as Discord does; their tokens stop
// working at once. Best effort: a failure is logged, and a webhook left
// behind can post nowhere (its channel is gone).
func (h *webhookHandler) dropWebhooks(r *http.Request, guildID, channelID snowflake.ID) {
	ctx, cancel := background(r.Context())
	defer cancel()
	all, err := h.store.GuildWebhooks(ctx, guildID)
	if err != nil {
		h.log.Warn("webhooks of a deleted channel not listed", "guild_id", guildID, "channel_id", channelID, "err", err)
		return
	}
	for _, wh := range all {
		if channelID != 0 && wh.ChannelID != channelID {
			continue
		}
		if err := h.store.DeleteWebhook(ctx, wh.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			h.log.Warn("webhook of a deleted channel left behind", "webhook_id", wh.ID, "err", err)
		}
	}
}
