package bots

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Gateway intents gated by application flags.
const (
	intentGuildMembers   = 1 << 1
	intentGuildPresences = 1 << 8
	intentMessageContent = 1 << 15
	// PrivilegedIntents are the gateway intents an owner must enable.
	PrivilegedIntents = intentGuildMembers | intentGuildPresences | intentMessageContent
)

// applicationJSON is Discord's application object.
type applicationJSON struct {
	ID                      snowflake.ID `json:"id"`
	Name                    string       `json:"name"`
	Icon                    *string      `json:"icon"`
	Description             string       `json:"description"`
	RPCOrigins              []string     `json:"rpc_origins"`
	BotPublic               bool         `json:"bot_public"`
	BotRequireCodeGrant     bool         `json:"bot_require_code_grant"`
	Bot                     *wire.User   `json:"bot,omitempty"`
	Owner                   wire.User    `json:"owner"`
	Team                    any          `json:"team"`
	VerifyKey               string       `json:"verify_key"`
	Flags                   int          `json:"flags"`
	InteractionsEndpointURL *string      `json:"interactions_endpoint_url"`
	RedirectURIs            []string     `json:"redirect_uris"`
	Tags                    []string     `json:"tags"`
	ApproximateGuildCount   int          `json:"approximate_guild_count"`
	// Token is set only in the answer that created the application.
	Token string `json:"token,omitempty"`
}

func (h *Handler) applicationJSON(ctx context.Context, a Application) (applicationJSON, error) {
	owner, err := h.deps.Users.GetUser(ctx, a.OwnerID)
	if err != nil {
		return applicationJSON{}, userErr(err)
	}
	out := applicationJSON{
		ID: a.ID, Name: a.Name, Description: a.Description, RPCOrigins: []string{}, BotPublic: a.BotPublic,
		Owner: wire.UserFrom(owner), VerifyKey: hex.EncodeToString(a.PublicKey), Flags: a.Flags,
		RedirectURIs: []string{}, Tags: []string{},
	}
	if bot, err := h.deps.Users.GetUser(ctx, a.BotUserID); err == nil {
		u := wire.UserFrom(bot)
		out.Bot = &u
	}
	if a.InteractionsEndpointURL != "" {
		u := a.InteractionsEndpointURL
		out.InteractionsEndpointURL = &u
	}
	return out, nil
}

func userErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnknownApplication, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// storeErr maps a Store error: missing is notFound, anything else 503.
func storeErr(err, notFound error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", notFound, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

type createApplicationRequest struct {
	Name        *string `json:"name"`
	Description string  `json:"description"`
}

func validName(name string) bool {
	n := utf8.RuneCountInString(name)
	return n >= 2 && n <= 32 && strings.TrimSpace(name) == name
}

// createApplication is POST /applications: the caller owns the new
// application; its bot user is created with it and the first token is in
// the answer, shown once.
func (h *Handler) createApplication(w http.ResponseWriter, r *http.Request, c caller) error {
	if c.bot {
		return ErrBotsForbidden
	}
	var req createApplicationRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if req.Name == nil || !validName(*req.Name) {
		return FormError("name", "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 32 in length.")
	}
	if utf8.RuneCountInString(req.Description) > 400 {
		return FormError("description", "BASE_TYPE_MAX_LENGTH", "Must be 400 or fewer in length.")
	}
	ctx := r.Context()
	// The bot user shares the application's id, as on Discord: bot code
	// registers commands under client.user.id and libraries read the
	// application id from READY's user.
	appID, err := h.deps.IDs.Next()
	if err != nil {
		return fmt.Errorf("%w: mint application id: %w", ErrUnavailable, err)
	}
	botID := appID
	pub, sealed, err := h.keys.newKeyPair(appID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	bot, err := h.createBotUser(ctx, botID, *req.Name)
	if err != nil {
		return err
	}
	a := Application{
		ID: appID, Name: *req.Name, Description: req.Description, OwnerID: c.id, BotUserID: bot.ID,
		PublicKey: pub, SealedPrivateKey: sealed, BotPublic: true, CreatedAt: h.cfg.Clock.Now(),
	}
	if err := h.deps.Store.CreateApplication(ctx, a); err != nil {
		return fmt.Errorf("%w: create application: %w", ErrUnavailable, err)
	}
	out, err := h.applicationJSON(ctx, a)
	if err != nil {
		return err
	}
	out.Token = h.deps.Tokens.Mint(bot)
	h.log.Info("application created", "application_id", a.ID, "owner_id", c.id, "bot_user_id", bot.ID)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// listApplications is GET /applications: the caller's own applications.
func (h *Handler) listApplications(w http.ResponseWriter, r *http.Request, c caller) error {
	apps, err := h.deps.Store.ApplicationsByOwner(r.Context(), c.id)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]applicationJSON, 0, len(apps))
	for _, a := range apps {
		j, err := h.applicationJSON(r.Context(), a)
		if err != nil {
			return err
		}
		out = append(out, j)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createBotUser creates the bot user, suffixing the name with digits of
// its id while the username is taken.
func (h *Handler) createBotUser(ctx context.Context, id snowflake.ID, name string) (store.User, error) {
	u := store.User{ID: id, Username: name, GlobalName: name, Bot: true, CreatedAt: h.cfg.Clock.Now()}
	digits := id.String()
	for _, n := range []int{0, 4, 6, 8, len(digits)} {
		if n > 0 {
			u.Username = name + "-" + digits[len(digits)-n:]
		}
		err := h.deps.Users.CreateUser(ctx, u)
		if err == nil {
			return u, nil
		}
		if !errors.Is(err, store.ErrExists) {
			return store.User{}, fmt.Errorf("%w: create bot user: %w", ErrUnavailable, err)
		}
	}
	return store.User{}, FormError("name", "USERNAME_ALREADY_TAKEN", "Username is unavailable.")
}

// ownedApplication loads the {app} of the path when c is its owner or its
// bot; anyone else gets 10002, as if it did not exist.
func (h *Handler) ownedApplication(r *http.Request, c caller) (Application, error) {
	id, err := pathID(r, "app", ErrUnknownApplication)
	if err != nil {
		return Application{}, err
	}
	a, err := h.deps.Store.GetApplication(r.Context(), id)
	if err != nil {
		return Application{}, storeErr(err, ErrUnknownApplication)
	}
	if c.id != a.OwnerID && c.id != a.BotUserID {
		return Application{}, ErrUnknownApplication
	}
	return a, nil
}

func (h *Handler) getApplication(w http.ResponseWriter, r *http.Request, c caller) error {
	a, err := h.ownedApplication(r, c)
	if err != nil {
		return err
	}
	out, err := h.applicationJSON(r.Context(), a)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// currentApplication is GET /oauth2/applications/@me. A bot gets its
// application; a user token without one (development bots that log in
// with a user token) gets a stand-in application named after the user,
// which keeps discord.py's startup working.
func (h *Handler) currentApplication(w http.ResponseWriter, r *http.Request, c caller) error {
	ctx := r.Context()
	a, err := h.deps.Store.ApplicationByBot(ctx, c.id)
	if err == nil {
		out, err := h.applicationJSON(ctx, a)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	u, err := h.deps.Users.GetUser(ctx, c.id)
	if err != nil {
		return userErr(err)
	}
	writeJSON(w, http.StatusOK, applicationJSON{
		ID: u.ID, Name: u.Username, RPCOrigins: []string{}, BotPublic: true, Owner: wire.UserFrom(u),
		RedirectURIs: []string{}, Tags: []string{},
	})
	return nil
}

type patchApplicationRequest struct {
	Description             *string `json:"description"`
	InteractionsEndpointURL *string `json:"interactions_endpoint_url"`
	Flags                   *int    `json:"flags"`
}

func (h *Handler) patchCurrentApplication(w http.ResponseWriter, r *http.Request, c caller) error {
	a, err := h.deps.Store.ApplicationByBot(r.Context(), c.id)
	if err != nil {
		return storeErr(err, ErrUnknownApplication)
	}
	return h.patch(w, r, c, a)
}

func (h *Handler) patchApplication(w http.ResponseWriter, r *http.Request, c caller) error {
	a, err := h.ownedApplication(r, c)
	if err != nil {
		return err
	}
	return h.patch(w, r, c, a)
}

// patch edits an application. Setting interactions_endpoint_url first
// verifies the URL (address policy, signed PING answered with PONG, forged
// PING refused). Only the owner may change the privileged-intent flags.
func (h *Handler) patch(w http.ResponseWriter, r *http.Request, c caller, a Application) error {
	var req patchApplicationRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if req.Description != nil {
		if utf8.RuneCountInString(*req.Description) > 400 {
			return FormError("description", "BASE_TYPE_MAX_LENGTH", "Must be 400 or fewer in length.")
		}
		a.Description = *req.Description
	}
	if req.Flags != nil {
		if c.id != a.OwnerID {
			return fmt.Errorf("%w: only the owner may change flags", ErrMissingPermissions)
		}
		if *req.Flags&^privilegedFlags != a.Flags&^privilegedFlags {
			return FormError("flags", "APPLICATION_FLAGS_INVALID", "Only the privileged intent flags can be changed.")
		}
		a.Flags = *req.Flags
	}
	if req.InteractionsEndpointURL != nil {
		u := strings.TrimSpace(*req.InteractionsEndpointURL)
		if u != "" {
			if err := h.verifyEndpoint(r.Context(), a, u); err != nil {
				return err
			}
		}
		a.InteractionsEndpointURL = u
	}
	if err := h.deps.Store.PutApplication(r.Context(), a); err != nil {
		return fmt.Errorf("%w: update application: %w", ErrUnavailable, err)
	}
	out, err := h.applicationJSON(r.Context(), a)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// resetBotToken is POST /applications/{id}/bot/reset: every earlier token
// of the bot stops working and the new one is returned, once.
func (h *Handler) resetBotToken(w http.ResponseWriter, r *http.Request, c caller) error {
	a, err := h.ownedApplication(r, c)
	if err != nil {
		return err
	}
	if c.id != a.OwnerID {
		return fmt.Errorf("%w: only the owner may reset the token", ErrMissingPermissions)
	}
	ctx := r.Context()
	if err := h.deps.Tokens.Revoke(ctx, a.BotUserID); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	bot, err := h.deps.Users.GetUser(ctx, a.BotUserID)
	if err != nil {
		return userErr(err)
	}
	if h.deps.TokenReset != nil {
		h.deps.TokenReset(ctx, a.BotUserID)
	}
	h.revoked(ctx, Revocation{Kind: RevokedToken, ApplicationID: a.ID, BotUserID: a.BotUserID, TokenGeneration: bot.TokenGeneration})
	h.log.Info("bot token reset", "application_id", a.ID, "bot_user_id", a.BotUserID)
	writeJSON(w, http.StatusOK, map[string]string{"token": h.deps.Tokens.Mint(bot)})
	return nil
}

// AllowedIntents returns the privileged gateway intents (GUILD_MEMBERS,
// GUILD_PRESENCES, MESSAGE_CONTENT bits) the owner enabled for the
// application of botUserID; a user that is no application's bot gets all
// of them (Concord's user-token development bots). The gateway refuses an
// IDENTIFY asking for a privileged intent outside this set (close 4014).
func (h *Handler) AllowedIntents(ctx context.Context, botUserID snowflake.ID) (uint64, error) {
	a, err := h.deps.Store.ApplicationByBot(ctx, botUserID)
	if errors.Is(err, ErrNotFound) {
		return PrivilegedIntents, nil
	}
	if err != nil {
		return 0, fmt.Errorf("allowed intents of %d: %w", botUserID, err)
	}
	return AllowedIntents(a.Flags), nil
}

// AllowedIntents returns the privileged intents an application's flags
// (FlagGatewayGuildMembers, FlagGatewayPresence,
// FlagGatewayMessageContent) let its bot request.
func AllowedIntents(flags int) uint64 {
	var out uint64
	if flags&FlagGatewayGuildMembers != 0 {
		out |= intentGuildMembers
	}
	if flags&FlagGatewayPresence != 0 {
		out |= intentGuildPresences
	}
	if flags&FlagGatewayMessageContent != 0 {
		out |= intentMessageContent
	}
	return out
}
