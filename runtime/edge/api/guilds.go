package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type createGuildRequest struct {
	Name string `json:"name"`
}

type modifyGuildRequest struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Icon        *string `json:"icon"`
	OwnerID     *reqID  `json:"owner_id"`
}

func guildJSON(info guild.GuildInfo) wire.Guild {
	return wire.GuildFrom(info.Guild, info.Roles)
}

func (h *guildHandler) createGuild(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	var req createGuildRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if n := len([]rune(req.Name)); n < 2 || n > 100 {
		return formError("name", "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 100 in length.")
	}
	info, err := h.guilds.CreateGuild(r.Context(), user, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, guildJSON(info))
	return nil
}

func (h *guildHandler) getGuild(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	info, err := h.guilds.GuildInfo(r.Context(), user, id)
	if err != nil {
		return err
	}
	g := guildJSON(info)
	if r.URL.Query().Get("with_counts") == "true" {
		writeJSON(w, http.StatusOK, struct {
			wire.Guild
			ApproximateMemberCount   int `json:"approximate_member_count"`
			ApproximatePresenceCount int `json:"approximate_presence_count"`
		}{g, info.MemberCount, 0})
		return nil
	}
	writeJSON(w, http.StatusOK, g)
	return nil
}

func (h *guildHandler) modifyGuild(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	var req modifyGuildRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	p := guild.GuildPatch{Name: req.Name, Description: req.Description, Icon: req.Icon}
	if req.Name != nil {
		if n := len([]rune(*req.Name)); n < 2 || n > 100 {
			return formError("name", "BASE_TYPE_BAD_LENGTH", "Must be between 2 and 100 in length.")
		}
	}
	if req.OwnerID != nil {
		o := snowflake.ID(*req.OwnerID)
		p.OwnerID = &o
	}
	info, err := h.guilds.ModifyGuild(r.Context(), user, id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, guildJSON(info))
	return nil
}

func (h *guildHandler) deleteGuild(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	if err := h.guilds.DeleteGuild(r.Context(), user, id); err != nil {
		return err
	}
	h.webhook.dropWebhooks(r, id, 0)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Roles.

type roleRequest struct {
	Name        *string     `json:"name"`
	Permissions *reqBits    `json:"permissions"`
	Color       *int        `json:"color"`
	Colors      *roleColors `json:"colors"`
	Hoist       *bool       `json:"hoist"`
	Mentionable *bool       `json:"mentionable"`
	Icon        *string     `json:"icon"`
	Emoji       *string     `json:"unicode_emoji"`
}

func decodeRole(body []byte) (guild.RoleSpec, error) {
	var req roleRequest
	if err := decodeJSON(body, &req); err != nil {
		return guild.RoleSpec{}, err
	}
	if req.Name != nil {
		if n := len([]rune(*req.Name)); n > 100 {
			return guild.RoleSpec{}, formError("name", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
		}
	}
	if req.Color != nil && (*req.Color < 0 || *req.Color > 0xFFFFFF) {
		return guild.RoleSpec{}, formError("color", "NUMBER_TYPE_MAX", "int value should be less than or equal to 16777215.")
	}
	spec := guild.RoleSpec{Name: req.Name, Color: req.Color, Hoist: req.Hoist, Mentionable: req.Mentionable}
	if err := req.checkExtras(&spec); err != nil {
		return guild.RoleSpec{}, err
	}
	if spec.Name != nil && *spec.Name == "" {
		name := "new role"
		spec.Name = &name
	}
	if req.Permissions != nil {
		p := uint64(*req.Permissions)
		spec.Permissions = &p
	}
	return spec, nil
}

func (h *roleHandler) listRoles(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	roles, err := h.roles.List(r.Context(), user, id)
	if err != nil {
		return err
	}
	out := make([]wire.Role, 0, len(roles))
	for _, role := range roles {
		out = append(out, wire.RoleFrom(role))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *roleHandler) createRole(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	spec, err := decodeRole(body)
	if err != nil {
		return err
	}
	role, err := h.roles.Create(r.Context(), user, id, spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.RoleFrom(role))
	return nil
}

func (h *roleHandler) modifyRole(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	roleID, err := pathID(r, "role", guild.ErrUnknownRole)
	if err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	spec, err := decodeRole(body)
	if err != nil {
		return err
	}
	role, err := h.roles.Modify(r.Context(), user, id, roleID, spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.RoleFrom(role))
	return nil
}

// rolePosition is one entry of PATCH /guilds/{guild}/roles.
type rolePosition struct {
	ID       *reqID `json:"id"`
	Position *int   `json:"position"`
}

// modifyRolePositions is PATCH /guilds/{guild}/roles: a list of {id,
// position}; the answer is every role by position. Moves go through the
// guild's grant check (hierarchy; @everyone never moves).
func (h *roleHandler) modifyRolePositions(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	moves, err := decodeRolePositions(body)
	if err != nil {
		return err
	}
	roles, err := h.roles.ModifyPositions(r.Context(), user, id, moves)
	if err != nil {
		return err
	}
	out := make([]wire.Role, 0, len(roles))
	for _, ro := range roles {
		out = append(out, wire.RoleFrom(ro))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decodeRolePositions reads a positions request: a JSON array of at most
// maxRoles {id, position} objects; entries without a position are skipped.
func decodeRolePositions(body []byte) ([]guild.RoleMove, error) {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '[' {
		return nil, formError("", "BASE_TYPE_ARRAY", "Must be an array.")
	}
	var req []rolePosition
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if len(req) > maxRoles {
		return nil, formError("", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxRoles))
	}
	moves := make([]guild.RoleMove, 0, len(req))
	for i, p := range req {
		if p.ID == nil {
			return nil, formError(fmt.Sprintf("%d.id", i), "BASE_TYPE_REQUIRED", "This field is required")
		}
		if p.Position == nil {
			continue // Discord accepts entries without a position and leaves them.
		}
		moves = append(moves, guild.RoleMove{ID: snowflake.ID(*p.ID), Position: *p.Position})
	}
	return moves, nil
}

// maxRoles is Discord's limit on a guild's roles, which also bounds a
// positions request.
const maxRoles = 250

func (h *roleHandler) deleteRole(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	roleID, err := pathID(r, "role", guild.ErrUnknownRole)
	if err != nil {
		return err
	}
	if err := h.roles.Delete(r.Context(), user, id, roleID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// queryInt reads an integer query parameter in [lo, hi], def when absent.
func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, formError(name, "NUMBER_TYPE_COERCE", "Value \""+truncate(s, 30)+"\" is not int.")
	}
	if v < lo || v > hi {
		return 0, formError(name, "NUMBER_TYPE_MAX", "int value should be between "+strconv.Itoa(lo)+" and "+strconv.Itoa(hi)+".")
	}
	return v, nil
}

// queryID reads a snowflake query parameter (0 when absent).
func queryID(r *http.Request, name string) (snowflake.ID, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	id, err := snowflake.Parse(s)
	if err != nil {
		return 0, formError(name, "NUMBER_TYPE_COERCE", "Value \""+truncate(s, 30)+"\" is not snowflake.")
	}
	return id, nil
}
