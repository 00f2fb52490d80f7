package api

import (
	"net/http"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
)

// voiceRegion is Discord's voice region object.
type voiceRegion struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Optimal    bool   `json:"optimal"`
	Deprecated bool   `json:"deprecated"`
	Custom     bool   `json:"custom"`
}

// voiceRegions lists the regions that have a healthy voice server. The
// optimal one is the guild node's own region when the fleet has it, else
// the first: a REST caller has no gateway session whose node would say
// where it is, and Concord uses no geo-IP.
func (h *voiceHandler) voiceRegions(w http.ResponseWriter, r *http.Request, _ snowflake.ID) error {
	regions := h.voice.Regions()
	optimal := 0
	home := h.voice.HomeRegion()
	for i, rg := range regions {
		if home != "" && rg.ID == home {
			optimal = i
		}
	}
	out := []voiceRegion{}
	for i, rg := range regions {
		out = append(out, voiceRegion{ID: rg.ID, Name: rg.Name, Optimal: i == optimal})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// guildVoiceRegions is GET /guilds/{id}/regions, for members of the guild.
func (h *voiceHandler) guildVoiceRegions(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	if _, err := h.voice.ModifyMember(r.Context(), user, g, user, guild.VoicePatch{}); err != nil {
		return err
	}
	return h.voiceRegions(w, r, user)
}

// modifyMemberVoiceRequest is the voice part of PATCH
// /guilds/{id}/members/{user}.
type modifyMemberVoiceRequest struct {
	Mute      nullable[bool]  `json:"mute"`
	Deaf      nullable[bool]  `json:"deaf"`
	ChannelID nullable[reqID] `json:"channel_id"`
}

func decodeMemberVoice(body []byte) (guild.VoicePatch, error) {
	var req modifyMemberVoiceRequest
	if err := decodeJSON(body, &req); err != nil {
		return guild.VoicePatch{}, err
	}
	var p guild.VoicePatch
	if req.Mute.Set && !req.Mute.Null {
		v := req.Mute.Value
		p.Mute = &v
	}
	if req.Deaf.Set && !req.Deaf.Null {
		v := req.Deaf.Value
		p.Deaf = &v
	}
	if req.ChannelID.Set {
		p.Move = true
		if !req.ChannelID.Null {
			p.Channel = snowflake.ID(req.ChannelID.Value)
		}
	}
	return p, nil
}
