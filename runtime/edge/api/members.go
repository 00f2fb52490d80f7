package api

import (
	"context"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// memberJSON renders a stored member with its user.
func (p *people) memberJSON(ctx context.Context, m store.Member) (wire.Member, error) {
	u, err := p.guilds.User(ctx, m.UserID)
	if err != nil {
		return wire.Member{}, err
	}
	return wire.MemberFrom(m, &u, p.now()), nil
}

// memberPath reads {guild} and {user}; "@me" is the caller.
func memberPath(r *http.Request, user snowflake.ID) (snowflake.ID, snowflake.ID, error) {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return 0, 0, err
	}
	if r.PathValue("user") == "@me" {
		return g, user, nil
	}
	m, err := pathID(r, "user", guild.ErrUnknownMember)
	return g, m, err
}

func (h *memberHandler) listMembers(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1, 1, 1000)
	if err != nil {
		return err
	}
	after, err := queryID(r, "after")
	if err != nil {
		return err
	}
	ms, err := h.members.List(r.Context(), user, g, limit, after)
	if err != nil {
		return err
	}
	out := make([]wire.Member, 0, len(ms))
	for _, m := range ms {
		wm, err := h.memberJSON(r.Context(), m)
		if err != nil {
			return err
		}
		out = append(out, wm)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *memberHandler) getMember(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, m, err := memberPath(r, user)
	if err != nil {
		return err
	}
	mem, err := h.members.Get(r.Context(), user, g, m)
	if err != nil {
		return err
	}
	wm, err := h.memberJSON(r.Context(), mem)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wm)
	return nil
}

type modifyMemberRequest struct {
	Nick                       nullable[string]         `json:"nick"`
	Roles                      nullable[[]reqID]        `json:"roles"`
	CommunicationDisabledUntil nullable[wire.Timestamp] `json:"communication_disabled_until"`
}

func decodeModifyMember(body []byte) (guild.MemberPatch, error) {
	var req modifyMemberRequest
	if err := decodeJSON(body, &req); err != nil {
		return guild.MemberPatch{}, err
	}
	var p guild.MemberPatch
	if req.Nick.Set {
		nick := req.Nick.Value
		if len([]rune(nick)) > 32 {
			return p, formError("nick", "BASE_TYPE_MAX_LENGTH", "Must be 32 or fewer in length.")
		}
		p.Nick = &nick
	}
	if req.Roles.Set {
		roles := ids(req.Roles.Value)
		p.Roles = &roles
	}
	if req.CommunicationDisabledUntil.Set {
		var until time.Time
		if !req.CommunicationDisabledUntil.Null {
			until = req.CommunicationDisabledUntil.Value.Time()
		}
		p.CommunicationDisabledUntil = &until
	}
	return p, nil
}

func (h *memberHandler) modifyMember(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, m, err := memberPath(r, user)
	if err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	p, err := decodeModifyMember(body)
	if err != nil {
		return err
	}
	if p.CommunicationDisabledUntil != nil && !p.CommunicationDisabledUntil.IsZero() && !p.CommunicationDisabledUntil.After(h.now()) {
		return formError("communication_disabled_until", "COMMUNICATION_DISABLED_UNTIL_IN_PAST", "Timeout must be in the future.")
	}
	vp, err := decodeMemberVoice(body)
	if err != nil {
		return err
	}
	vm, err := h.voice.ModifyMember(r.Context(), user, g, m, vp)
	if err != nil {
		return err
	}
	mem, err := h.members.Modify(r.Context(), user, g, m, p)
	if err != nil {
		return err
	}
	wm, err := h.memberJSON(r.Context(), mem)
	if err != nil {
		return err
	}
	wm.Mute, wm.Deaf = vm.Mute, vm.Deaf
	writeJSON(w, http.StatusOK, wm)
	return nil
}

func (h *memberHandler) removeMember(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, m, err := memberPath(r, user)
	if err != nil {
		return err
	}
	if err := h.members.Remove(r.Context(), user, g, m); err != nil {
		return err
	}
	h.removed(r.Context(), g, m)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *memberHandler) memberRole(w http.ResponseWriter, r *http.Request, user snowflake.ID, add bool) error {
	g, m, err := memberPath(r, user)
	if err != nil {
		return err
	}
	role, err := pathID(r, "role", guild.ErrUnknownRole)
	if err != nil {
		return err
	}
	if add {
		err = h.members.AddRole(r.Context(), user, g, m, role)
	} else {
		err = h.members.RemoveRole(r.Context(), user, g, m, role)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *memberHandler) addMemberRole(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.memberRole(w, r, user, true)
}

func (h *memberHandler) removeMemberRole(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.memberRole(w, r, user, false)
}

// removed runs Deps.MemberRemoved for a member that left or was removed,
// on a context that outlives the caller's disconnect.
func (f removedHook) removed(ctx context.Context, guildID, userID snowflake.ID) {
	if f == nil {
		return
	}
	bg, cancel := background(ctx)
	defer cancel()
	f(bg, guildID, userID)
}
