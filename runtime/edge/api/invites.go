package api

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

func itoa(i int) string { return strconv.Itoa(i) }

type createInviteRequest struct {
	MaxAge    *int `json:"max_age"`
	MaxUses   int  `json:"max_uses"`
	Temporary bool `json:"temporary"`
	Unique    bool `json:"unique"`
}

func newInviteCode() string {
	return rand.Text()[:10]
}

func (h *inviteHandler) createInvite(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	var req createInviteRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	maxAge := 86400
	if req.MaxAge != nil {
		maxAge = *req.MaxAge
	}
	if maxAge < 0 || maxAge > 604800 {
		return formError("max_age", "NUMBER_TYPE_MAX", "int value should be between 0 and 604800.")
	}
	if req.MaxUses < 0 || req.MaxUses > 100 {
		return formError("max_uses", "NUMBER_TYPE_MAX", "int value should be between 0 and 100.")
	}
	v, err := h.guilds.Authorize(r.Context(), user, id, permissions.CreateInstantInvite)
	if err != nil {
		return err
	}
	if v.Channel.GuildID == 0 {
		return guild.ErrMissingPermissions
	}
	inv := store.Invite{
		Code: newInviteCode(), GuildID: v.Channel.GuildID, ChannelID: id, InviterID: user,
		MaxUses: req.MaxUses, MaxAge: maxAge, CreatedAt: h.now(),
	}
	if err := h.store.PutInvite(r.Context(), inv); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	out, err := h.inviteJSON(r.Context(), inv, v.Channel)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *inviteHandler) inviteJSON(ctx context.Context, inv store.Invite, c store.Channel) (wire.Invite, error) {
	gs, err := h.store.LoadGuild(ctx, inv.GuildID)
	if errors.Is(err, store.ErrNotFound) {
		return wire.Invite{}, errUnknownInvite
	}
	if err != nil {
		return wire.Invite{}, errors.Join(guild.ErrUnavailable, err)
	}
	var inviter *wire.User
	if u, err := h.guilds.User(ctx, inv.InviterID); err == nil {
		inviter = &u
	}
	return wire.InviteFrom(inv, gs.Guild, c, inviter), nil
}

// liveInvite loads an invite that has neither expired nor run out of uses.
func (h *inviteHandler) liveInvite(ctx context.Context, code string) (store.Invite, store.Channel, error) {
	if code == "" || len(code) > 64 {
		return store.Invite{}, store.Channel{}, errUnknownInvite
	}
	inv, err := h.store.GetInvite(ctx, code)
	if errors.Is(err, store.ErrNotFound) {
		return inv, store.Channel{}, errUnknownInvite
	}
	if err != nil {
		return inv, store.Channel{}, errors.Join(guild.ErrUnavailable, err)
	}
	now := h.now()
	if (inv.MaxAge > 0 && now.After(inv.CreatedAt.Add(time.Duration(inv.MaxAge)*time.Second))) ||
		(inv.MaxUses > 0 && inv.Uses >= inv.MaxUses) {
		return inv, store.Channel{}, errUnknownInvite
	}
	c, err := h.store.GetChannel(ctx, inv.ChannelID)
	if errors.Is(err, store.ErrNotFound) {
		return inv, c, errUnknownInvite
	}
	if err != nil {
		return inv, c, errors.Join(guild.ErrUnavailable, err)
	}
	return inv, c, nil
}

func (h *inviteHandler) getInvite(w http.ResponseWriter, r *http.Request) error {
	inv, c, err := h.liveInvite(r.Context(), r.PathValue("code"))
	if err != nil {
		return err
	}
	out, err := h.inviteJSON(r.Context(), inv, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// acceptInvite joins the caller to the invite's guild. Uses count new
// members only. Concurrent accepts of a max_uses invite may overshoot by
// the number racing; the store has no compare-and-set.
func (h *inviteHandler) acceptInvite(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	inv, c, err := h.liveInvite(r.Context(), r.PathValue("code"))
	if err != nil {
		return err
	}
	_, added, err := h.guilds.Members.Add(r.Context(), inv.GuildID, user)
	if err != nil {
		return err
	}
	if added {
		inv.Uses++
		if err := h.store.PutInvite(r.Context(), inv); err != nil {
			return errors.Join(guild.ErrUnavailable, err)
		}
	}
	out, err := h.inviteJSON(r.Context(), inv, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *inviteHandler) deleteInvite(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	code := r.PathValue("code")
	inv, err := h.store.GetInvite(r.Context(), code)
	if errors.Is(err, store.ErrNotFound) {
		return errUnknownInvite
	}
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if _, err := h.guilds.Authorize(r.Context(), user, inv.ChannelID, permissions.ManageChannels); err != nil {
		if gerr := h.guilds.AuthorizeGuild(r.Context(), user, inv.GuildID, permissions.ManageGuild); gerr != nil {
			return err
		}
	}
	c, err := h.store.GetChannel(r.Context(), inv.ChannelID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return errors.Join(guild.ErrUnavailable, err)
	}
	out, err := h.inviteJSON(r.Context(), inv, c)
	if err != nil {
		return err
	}
	if err := h.store.DeleteInvite(r.Context(), code); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
