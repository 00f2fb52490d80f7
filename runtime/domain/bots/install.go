package bots

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

type authorizeRequest struct {
	GuildID     *snowflake.ID `json:"guild_id"`
	Permissions optBits       `json:"permissions"`
	Authorize   bool          `json:"authorize"`
}

// authorize is POST /oauth2/authorize?client_id=&scope=bot&permissions=
// with {guild_id, permissions, authorize:true}: a member with MANAGE_GUILD
// who holds every permission granted installs the bot (the guild's grant
// check, the same one overwrites and roles go through). The guild owns the
// installation: the bot becomes a member with a managed role carrying the
// bitset, and its effective permissions are that role intersected with
// the guild's roles and overwrites, evaluated by the guild on every call.
// Authorising an installed bot again sets the role's permissions.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, c caller) error {
	if c.bot {
		return ErrBotsForbidden
	}
	q := r.URL.Query()
	appID, err := snowflake.Parse(q.Get("client_id"))
	if err != nil {
		return FormError("client_id", "BASE_TYPE_REQUIRED", "client_id must be an application id.")
	}
	if !slices.Contains(strings.Fields(q.Get("scope")), "bot") {
		return FormError("scope", "OAUTH2_SCOPE_INVALID", "Only the bot scope can be authorized here.")
	}
	var req authorizeRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if req.GuildID == nil || *req.GuildID == 0 {
		return FormError("guild_id", "BASE_TYPE_REQUIRED", "This field is required.")
	}
	perms := req.Permissions
	if !perms.Set && q.Get("permissions") != "" {
		v, err := strconv.ParseUint(q.Get("permissions"), 10, 64)
		if err != nil {
			return FormError("permissions", "BASE_TYPE_BAD_TYPE", "Value is not a valid bitfield.")
		}
		perms = optBits{Set: true, V: v}
	}
	if perms.V&^uint64(permissions.All) != 0 {
		return FormError("permissions", "BASE_TYPE_BAD_TYPE", "Value has undefined permission bits.")
	}
	ctx := r.Context()
	a, err := h.deps.Store.GetApplication(ctx, appID)
	if err != nil {
		return storeErr(err, ErrUnknownApplication)
	}
	if !req.Authorize {
		writeJSON(w, http.StatusOK, map[string]string{"location": "/oauth2/authorized?error=access_denied"})
		return nil
	}
	if !a.BotPublic && c.id != a.OwnerID {
		return fmt.Errorf("%w: private application", ErrMissingAccess)
	}
	guildID := *req.GuildID
	bits := permissions.Bits(perms.V)
	prev, prevErr := h.deps.Store.GetInstallation(ctx, guildID, a.ID)
	// The guild decides whether the installer may grant bits, in the same
	// step as the install, so a role change in between cannot slip by.
	roleID, err := h.deps.Guilds.InstallBot(ctx, c.id, guildID, a.BotUserID, a.Name, bits)
	if err != nil {
		return fmt.Errorf("install application %d in guild %d by %d: %w", a.ID, guildID, c.id, err)
	}
	in := Installation{
		GuildID: guildID, ApplicationID: a.ID, BotUserID: a.BotUserID, RoleID: roleID,
		Permissions: perms.V, InstalledBy: c.id, InstalledAt: h.cfg.Clock.Now(),
	}
	if err := h.deps.Store.PutInstallation(ctx, in); err != nil {
		return fmt.Errorf("%w: record installation: %w", ErrUnavailable, err)
	}
	if prevErr == nil && prev.Permissions&^perms.V != 0 {
		h.revoked(ctx, Revocation{Kind: RevokedPermissions, ApplicationID: a.ID, BotUserID: a.BotUserID, GuildID: guildID})
	}
	h.log.Info("application installed", "application_id", a.ID, "guild_id", guildID, "role_id", roleID, "permissions", perms.V)
	v := url.Values{"guild_id": {guildID.String()}, "permissions": {strconv.FormatUint(perms.V, 10)}}
	writeJSON(w, http.StatusOK, map[string]any{
		"location":       "/oauth2/authorized?" + v.Encode(),
		"application_id": a.ID, "guild_id": guildID, "role_id": roleID,
	})
	return nil
}

// removeIntegration is DELETE /guilds/{guild}/integrations/{app}: a member
// with MANAGE_GUILD removes the bot (member and managed role) and its
// installation; the next REST call and event of the bot are refused.
func (h *Handler) removeIntegration(w http.ResponseWriter, r *http.Request, c caller) error {
	guildID, err := pathID(r, "guild", ErrUnknownGuild)
	if err != nil {
		return err
	}
	appID, err := pathID(r, "app", ErrUnknownApplication)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := h.deps.Guilds.AuthorizeGuild(ctx, c.id, guildID, permissions.ManageGuild); err != nil {
		return fmt.Errorf("remove integration %d from guild %d: %w", appID, guildID, err)
	}
	in, err := h.deps.Store.GetInstallation(ctx, guildID, appID)
	if err != nil {
		return storeErr(err, ErrUnknownApplication)
	}
	if err := h.Uninstall(ctx, in); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Uninstall removes an installation: the bot member and managed role
// (Guilds.UninstallBot), then the record and the guild's commands of the
// application.
func (h *Handler) Uninstall(ctx context.Context, in Installation) error {
	if err := h.deps.Guilds.UninstallBot(ctx, in.GuildID, in.BotUserID); err != nil {
		return fmt.Errorf("uninstall application %d from guild %d: %w", in.ApplicationID, in.GuildID, err)
	}
	return h.Uninstalled(ctx, in.GuildID, in.BotUserID)
}

// Uninstalled drops the installation record and guild commands of the
// bot botUserID in guildID after the guild removed the bot member (a kick
// or the bot leaving). The lead calls it from the member-removal path;
// until then nothing leaks, because every bot action is authorised by the
// guild against its current membership and roles.
func (h *Handler) Uninstalled(ctx context.Context, guildID, botUserID snowflake.ID) error {
	a, err := h.deps.Store.ApplicationByBot(ctx, botUserID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := h.deps.Store.DeleteInstallation(ctx, guildID, a.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: delete installation: %w", ErrUnavailable, err)
	}
	if err := h.deps.Store.ReplaceCommands(ctx, a.ID, guildID, nil); err != nil {
		return fmt.Errorf("%w: delete guild commands: %w", ErrUnavailable, err)
	}
	h.revoked(ctx, Revocation{Kind: RevokedInstall, ApplicationID: a.ID, BotUserID: botUserID, GuildID: guildID})
	h.log.Info("application uninstalled", "application_id", a.ID, "guild_id", guildID)
	return nil
}
