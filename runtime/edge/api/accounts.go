package api

import (
	"errors"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type registerRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	// Bot registers a bot account (intents then apply to its sessions).
	Bot bool `json:"bot"`
}

type loginRequest struct {
	Username string `json:"username"`
	Login    string `json:"login"`
	Password string `json:"password"`
}

func decodeRegister(body []byte) (registerRequest, error) {
	var req registerRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	if n := utf8.RuneCountInString(req.Username); n < 2 || n > 32 {
		return req, formError("username", "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 32 in length.")
	}
	if n := utf8.RuneCountInString(req.Password); n < 8 || n > 128 {
		return req, formError("password", "BASE_TYPE_BAD_LENGTH", "Must be between 8 and 128 in length.")
	}
	return req, nil
}

func (h *accountHandler) register(w http.ResponseWriter, r *http.Request) error {
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeRegister(body)
	if err != nil {
		return err
	}
	hash, err := h.auth.HashPassword(req.Password)
	if err != nil {
		return err
	}
	id, err := h.ids.Next()
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	u := store.User{ID: id, Username: req.Username, Bot: req.Bot, PasswordHash: hash, CreatedAt: h.now()}
	if err := h.store.CreateUser(r.Context(), u); err != nil {
		if errors.Is(err, store.ErrExists) {
			return formError("username", "USERNAME_ALREADY_TAKEN", "Username is unavailable. Try adding numbers, letters, underscores _ , or periods.")
		}
		return errors.Join(guild.ErrUnavailable, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": h.auth.Mint(u), "user_id": u.ID})
	return nil
}

func (h *accountHandler) login(w http.ResponseWriter, r *http.Request) error {
	var req loginRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	name := req.Username
	if name == "" {
		name = req.Login
	}
	bad := formError("login", "INVALID_LOGIN", "Login or password is invalid.")
	u, err := h.store.GetUserByName(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return bad
	}
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if u.PasswordHash == "" || h.auth.CheckPassword(u.PasswordHash, req.Password) != nil {
		return bad
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": h.auth.Mint(u), "user_id": u.ID})
	return nil
}

func (h *accountHandler) me(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	u, err := h.store.GetUser(r.Context(), user)
	if err != nil {
		return userErr(err)
	}
	writeJSON(w, http.StatusOK, wire.CurrentUserFrom(u))
	return nil
}

// application answers GET /oauth2/applications/@me, which discord.py
// calls at login; a bot is its own application.
func (h *accountHandler) application(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	u, err := h.store.GetUser(r.Context(), user)
	if err != nil {
		return userErr(err)
	}
	owner := wire.UserFrom(u)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": u.ID, "name": u.Username, "description": "", "icon": nil, "bot_public": true,
		"bot_require_code_grant": false, "verify_key": "", "owner": owner, "flags": 0, "team": nil,
	})
	return nil
}

func userErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return guild.ErrUnknownUser
	}
	return errors.Join(guild.ErrUnavailable, err)
}

func (h *accountHandler) getUser(w http.ResponseWriter, r *http.Request, _ snowflake.ID) error {
	id, err := pathID(r, "user", guild.ErrUnknownUser)
	if err != nil {
		return err
	}
	u, err := h.guilds.User(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (h *accountHandler) myGuilds(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	gs, err := h.store.UserGuilds(r.Context(), user)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	slices.Sort(gs)
	out := make([]wire.PartialGuild, 0, len(gs))
	for _, id := range gs {
		info, err := h.guilds.GuildInfo(r.Context(), user, id)
		if errors.Is(err, guild.ErrMissingAccess) || errors.Is(err, guild.ErrUnknownGuild) {
			continue
		}
		if err != nil {
			return err
		}
		g := wire.GuildFrom(info.Guild, nil)
		out = append(out, wire.PartialGuild{
			ID: g.ID, Name: g.Name, Icon: g.Icon, Owner: info.Guild.OwnerID == user,
			Permissions: wire.Bits(info.Permissions), Features: []string{},
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *accountHandler) leaveGuild(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	if err := h.guilds.Members.Remove(r.Context(), user, id, user); err != nil {
		return err
	}
	h.removed(r.Context(), id, user)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *accountHandler) gatewayURL(r *http.Request) string {
	if h.configuredGateway != "" {
		return h.configuredGateway
	}
	return "ws://" + r.Host + "/gateway"
}

func (h *accountHandler) gateway(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"url": h.gatewayURL(r)})
	return nil
}
