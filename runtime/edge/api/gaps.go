package api

import (
	"net/http"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Answers for parts of Discord's API Concord does not have (custom emoji,
// stickers, OAuth2 guild joins): reads return what exists (nothing), and
// writes are refused with an error that says why, never a silent 404.
var (
	errUnknownSticker = &apiError{Status: http.StatusNotFound, Code: 10060, Message: "Unknown Sticker"}
	errNoOAuth2Join   = &apiError{Status: http.StatusForbidden, Code: 50025, Message: "Invalid OAuth2 access token: Concord has no OAuth2 guild joins; add members through invites"}
)

func errUnavailableFeature(field, what string) error {
	return formError(field, "FEATURE_UNAVAILABLE", what+" are not available on Concord.")
}

var errUnknownEmojiNotFound = &apiError{Status: http.StatusNotFound, Code: 10014, Message: "Unknown Emoji"}

// memberOf checks that user is a member of the path's guild.
func (h *gapHandler) memberOf(r *http.Request, user snowflake.ID) (guild.GuildInfo, error) {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return guild.GuildInfo{}, err
	}
	return h.guilds.GuildInfo(r.Context(), user, g)
}

func (h *gapHandler) emptyGuildList(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	if _, err := h.memberOf(r, user); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []any{})
	return nil
}

func (h *gapHandler) unknownGuildItem(notFound error) authedFunc {
	return func(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
		if _, err := h.memberOf(r, user); err != nil {
			return err
		}
		return notFound
	}
}

func (h *gapHandler) refuseCreate(field, what string) authedFunc {
	return func(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
		if _, err := h.memberOf(r, user); err != nil {
			return err
		}
		return errUnavailableFeature(field, what)
	}
}

// guildPreview is GET /guilds/{g}/preview, for members (Concord has no
// discovery, so no guild is previewable by outsiders).
func (h *gapHandler) guildPreview(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	info, err := h.memberOf(r, user)
	if err != nil {
		return err
	}
	g := wire.GuildFrom(info.Guild, nil)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": g.ID, "name": g.Name, "icon": g.Icon, "splash": nil, "discovery_splash": nil,
		"emojis": []any{}, "stickers": []any{}, "features": []string{}, "description": g.Description,
		"approximate_member_count": info.MemberCount, "approximate_presence_count": 0,
	})
	return nil
}

// searchMembers is GET /guilds/{g}/members/search?query&limit (1..1000,
// default 1): members whose username, global name or nick starts with
// query, case-insensitively.
func (h *memberHandler) searchMembers(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	query := strings.ToLower(r.URL.Query().Get("query"))
	if query == "" {
		return formError("query", "BASE_TYPE_REQUIRED", "This field is required")
	}
	limit, err := queryInt(r, "limit", 1, 1, 1000)
	if err != nil {
		return err
	}
	ctx := r.Context()
	out := []wire.Member{}
	var after snowflake.ID
	for len(out) < limit {
		page, err := h.guilds.Members.List(ctx, user, g, 1000, after)
		if err != nil {
			return err
		}
		for _, m := range page {
			after = m.UserID
			wm, err := h.memberJSON(ctx, m)
			if err != nil {
				continue
			}
			names := []string{wm.User.Username}
			if wm.User.GlobalName != nil {
				names = append(names, *wm.User.GlobalName)
			}
			if wm.Nick != nil {
				names = append(names, *wm.Nick)
			}
			for _, n := range names {
				if n != "" && strings.HasPrefix(strings.ToLower(n), query) {
					out = append(out, wm)
					break
				}
			}
			if len(out) == limit {
				break
			}
		}
		if len(page) < 1000 {
			break
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
