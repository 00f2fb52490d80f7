package api

import (
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type overwriteRequest struct {
	ID    reqID   `json:"id"`
	Type  int     `json:"type"`
	Allow reqBits `json:"allow"`
	Deny  reqBits `json:"deny"`
}

type channelRequest struct {
	Name                 nullable[string]             `json:"name"`
	Type                 nullable[int]                `json:"type"`
	Topic                nullable[string]             `json:"topic"`
	Position             nullable[int]                `json:"position"`
	ParentID             nullable[reqID]              `json:"parent_id"`
	NSFW                 nullable[bool]               `json:"nsfw"`
	RateLimitPerUser     nullable[int]                `json:"rate_limit_per_user"`
	Bitrate              nullable[int]                `json:"bitrate"`
	UserLimit            nullable[int]                `json:"user_limit"`
	PermissionOverwrites nullable[[]overwriteRequest] `json:"permission_overwrites"`
	AvailableTags        nullable[[]forumTagRequest]  `json:"available_tags"`
	RTCRegion            nullable[string]             `json:"rtc_region"`
}

func (req *channelRequest) validate(create bool) error {
	if create && (!req.Name.Set || req.Name.Null) {
		return formError("name", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if req.Name.Set && !req.Name.Null {
		if n := len([]rune(req.Name.Value)); n < 1 || n > 100 {
			return formError("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
	}
	if req.Type.Set && !req.Type.Null {
		switch req.Type.Value {
		case store.ChannelText, store.ChannelVoice, store.ChannelCategory, store.ChannelForum:
		default:
			return formError("type", "BASE_TYPE_CHOICES", "Value must be one of {0, 2, 4, 15}.")
		}
	}
	if req.Topic.Set && len([]rune(req.Topic.Value)) > 1024 {
		return formError("topic", "BASE_TYPE_MAX_LENGTH", "Must be 1024 or fewer in length.")
	}
	if req.RateLimitPerUser.Set && (req.RateLimitPerUser.Value < 0 || req.RateLimitPerUser.Value > 21600) {
		return formError("rate_limit_per_user", "NUMBER_TYPE_MAX", "int value should be between 0 and 21600.")
	}
	if err := validateForumTags(req.AvailableTags.Value); err != nil {
		return err
	}
	for i, o := range req.PermissionOverwrites.Value {
		if o.Type != store.OverwriteRole && o.Type != store.OverwriteMember {
			return formError("permission_overwrites."+itoa(i)+".type", "BASE_TYPE_CHOICES", "Value must be one of {0, 1}.")
		}
	}
	return nil
}

func (req *channelRequest) overwrites() []store.Overwrite {
	out := make([]store.Overwrite, 0, len(req.PermissionOverwrites.Value))
	for _, o := range req.PermissionOverwrites.Value {
		out = append(out, store.Overwrite{ID: snowflake.ID(o.ID), Type: o.Type, Allow: uint64(o.Allow), Deny: uint64(o.Deny)})
	}
	return out
}

func decodeChannel(body []byte, create bool) (channelRequest, error) {
	var req channelRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	return req, req.validate(create)
}

func (h *channelHandler) listChannels(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	chans, err := h.channels.List(r.Context(), user, g)
	if err != nil {
		return err
	}
	out := make([]wire.Channel, 0, len(chans))
	for _, c := range chans {
		out = append(out, wire.ChannelFrom(c, nil))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *channelHandler) createChannel(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeChannel(body, true)
	if err != nil {
		return err
	}
	spec := guild.ChannelSpec{
		Name: req.Name.Value, Type: req.Type.Value, Topic: req.Topic.Value, ParentID: snowflake.ID(req.ParentID.Value),
		NSFW: req.NSFW.Value, RateLimitPerUser: req.RateLimitPerUser.Value, Bitrate: req.Bitrate.Value,
		UserLimit: req.UserLimit.Value, Overwrites: req.overwrites(),
	}
	if req.AvailableTags.Set {
		if spec.AvailableTags, err = h.thread.forumTags(req.AvailableTags.Value); err != nil {
			return err
		}
	}
	if spec.RTCRegion, err = h.voice.checkRTCRegion(req.RTCRegion); err != nil {
		return err
	}
	if req.Position.Set && !req.Position.Null {
		pos := req.Position.Value
		spec.Position = &pos
	}
	c, err := h.channels.Create(r.Context(), user, g, spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, wire.ChannelFrom(c, nil))
	return nil
}

func (h *channelHandler) getChannel(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	v, err := h.guilds.Authorize(r.Context(), user, id, 0)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h.guilds.Private.WireChannel(r.Context(), v.Channel, user))
	return nil
}

func (h *channelHandler) modifyChannel(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	if h.thread.isThread(r, id) {
		return h.thread.modifyThread(w, r, user, id)
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeChannel(body, false)
	if err != nil {
		return err
	}
	var p guild.ChannelPatch
	if req.Name.Set && !req.Name.Null {
		p.Name = &req.Name.Value
	}
	if req.Topic.Set {
		p.Topic = &req.Topic.Value
	}
	if req.Position.Set && !req.Position.Null {
		p.Position = &req.Position.Value
	}
	if req.ParentID.Set {
		parent := snowflake.ID(req.ParentID.Value)
		p.ParentID = &parent
	}
	if req.NSFW.Set {
		p.NSFW = &req.NSFW.Value
	}
	if req.RateLimitPerUser.Set {
		p.RateLimitPerUser = &req.RateLimitPerUser.Value
	}
	if req.Bitrate.Set {
		p.Bitrate = &req.Bitrate.Value
	}
	if req.UserLimit.Set {
		p.UserLimit = &req.UserLimit.Value
	}
	if req.PermissionOverwrites.Set {
		ows := req.overwrites()
		p.Overwrites = &ows
	}
	if req.AvailableTags.Set {
		tags, err := h.thread.forumTags(req.AvailableTags.Value)
		if err != nil {
			return err
		}
		p.AvailableTags = &tags
	}
	if req.RTCRegion.Set {
		region, err := h.voice.checkRTCRegion(req.RTCRegion)
		if err != nil {
			return err
		}
		p.RTCRegion = &region
	}
	c, err := h.channels.Modify(r.Context(), user, id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ChannelFrom(c, nil))
	return nil
}

func (h *channelHandler) deleteChannel(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	if h.thread.isThread(r, id) {
		return h.thread.deleteThread(w, r, user, id)
	}
	g, err := h.guilds.ChannelGuild(r.Context(), id)
	if err != nil {
		return err
	}
	if g == 0 {
		// Closing a DM only hides it for the caller in Discord; Concord
		// keeps it and answers with the channel.
		v, err := h.guilds.Authorize(r.Context(), user, id, 0)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, h.guilds.Private.WireChannel(r.Context(), v.Channel, user))
		return nil
	}
	c, threads, err := h.channels.Delete(r.Context(), user, id)
	if err != nil {
		return err
	}
	h.webhook.dropWebhooks(r, c.GuildID, c.ID)
	gone := []snowflake.ID{c.ID}
	for _, th := range threads {
		gone = append(gone, th.ID)
	}
	h.forgetChannels(r.Context(), gone...)
	writeJSON(w, http.StatusOK, wire.ChannelFrom(c, nil))
	return nil
}

type putOverwriteRequest struct {
	Type  nullable[int] `json:"type"`
	Allow reqBits       `json:"allow"`
	Deny  reqBits       `json:"deny"`
}

func (h *channelHandler) putOverwrite(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	target, err := pathID(r, "target", guild.ErrUnknownRole)
	if err != nil {
		return err
	}
	var req putOverwriteRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if !req.Type.Set || req.Type.Null {
		return formError("type", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if req.Type.Value != store.OverwriteRole && req.Type.Value != store.OverwriteMember {
		return formError("type", "BASE_TYPE_CHOICES", "Value must be one of {0, 1}.")
	}
	o := store.Overwrite{ID: target, Type: req.Type.Value, Allow: uint64(req.Allow), Deny: uint64(req.Deny)}
	if err := h.channels.PutOverwrite(r.Context(), user, id, o); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *channelHandler) deleteOverwrite(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	target, err := pathID(r, "target", guild.ErrUnknownRole)
	if err != nil {
		return err
	}
	if err := h.channels.DeleteOverwrite(r.Context(), user, id, target); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *channelHandler) typing(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	id, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	if err := h.messages.Typing(r.Context(), user, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
