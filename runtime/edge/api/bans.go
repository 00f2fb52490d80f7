package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// maxDeleteMessageSeconds is Discord's limit: seven days of messages.
const maxDeleteMessageSeconds = 604800

// maxBulkBan is Discord's limit of users per bulk ban.
const maxBulkBan = 200

var errBulkBanFailed = &apiError{Status: http.StatusInternalServerError, Code: 500000, Message: "Failed to ban users"}

type banRequest struct {
	DeleteMessageSeconds *int `json:"delete_message_seconds"`
	DeleteMessageDays    *int `json:"delete_message_days"` // deprecated form
}

func (req banRequest) seconds() (int, error) {
	s := 0
	if req.DeleteMessageDays != nil {
		if *req.DeleteMessageDays < 0 || *req.DeleteMessageDays > 7 {
			return 0, formError("delete_message_days", "NUMBER_TYPE_MAX", "int value should be between 0 and 7.")
		}
		s = *req.DeleteMessageDays * 86400
	}
	if req.DeleteMessageSeconds != nil {
		s = *req.DeleteMessageSeconds
		if s < 0 || s > maxDeleteMessageSeconds {
			return 0, formError("delete_message_seconds", "NUMBER_TYPE_MAX", "int value should be between 0 and 604800.")
		}
	}
	return s, nil
}

// banPath reads {guild} and {user}.
func banPath(r *http.Request) (snowflake.ID, snowflake.ID, error) {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return 0, 0, err
	}
	u, err := pathID(r, "user", guild.ErrUnknownUser)
	return g, u, err
}

// putBan is PUT /guilds/{g}/bans/{u}.
func (h *moderationHandler) putBan(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, target, err := banPath(r)
	if err != nil {
		return err
	}
	var req banRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	// discord.py sends the purge window as a query parameter, as Discord
	// also accepts; the body wins when it has one.
	for _, q := range []struct {
		name string
		dst  **int
	}{{"delete_message_seconds", &req.DeleteMessageSeconds}, {"delete_message_days", &req.DeleteMessageDays}} {
		if *q.dst == nil && r.URL.Query().Has(q.name) {
			v, err := queryInt(r, q.name, 0, 0, maxDeleteMessageSeconds)
			if err != nil {
				return err
			}
			*q.dst = &v
		}
	}
	secs, err := req.seconds()
	if err != nil {
		return err
	}
	if err := h.ban(r, user, g, target, secs); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ban bans one user, purges their recent messages and records it.
func (h *moderationHandler) ban(r *http.Request, user, g, target snowflake.ID, secs int) error {
	ctx := r.Context()
	reason := auditReason(r)
	if _, err := h.members.Ban(ctx, user, g, target, reason); err != nil {
		return err
	}
	if secs > 0 {
		h.purgeMessages(ctx, user, g, target, secs)
	}
	h.recordAudit(r, g, user, auditEntry{Action: auditMemberBanAdd, Target: target,
		Options: map[string]any{"delete_member_days": secs / 86400}})
	return nil
}

// purgeMessages deletes target's messages of the last secs seconds in
// every channel of the guild, with MESSAGE_DELETE(_BULK) events. It runs
// after the ban is stored; a failure is logged (the ban stands).
func (h *moderationHandler) purgeMessages(ctx context.Context, user, g, target snowflake.ID, secs int) {
	bg, cancel := background(ctx)
	defer cancel()
	chans, err := h.members.MessageChannels(bg, user, g, permissions.BanMembers)
	if err != nil {
		h.log.Warn("ban purge: channels", "guild_id", g, "err", err)
		return
	}
	cursor := snowflake.FromTime(h.now().Add(-timeSeconds(secs)))
	for _, ch := range chans {
		var mine []store.Message
		after := cursor
		for {
			ms, err := h.store.ListMessages(bg, ch, store.HistoryQuery{After: after, Limit: 100})
			if err != nil {
				h.log.Warn("ban purge: history", "channel_id", ch, "err", err)
				break
			}
			for _, m := range ms {
				if m.AuthorID == target {
					mine = append(mine, m)
				}
				after = max(after, m.ID)
			}
			if len(ms) < 100 {
				break
			}
		}
		if len(mine) == 0 {
			continue
		}
		slices.SortFunc(mine, func(a, b store.Message) int { return cmp.Compare(a.ID, b.ID) })
		if err := h.guilds.Messages.Delete(bg, guild.MessageDelete{ChannelID: ch, Messages: mine, Purge: true}); err != nil {
			h.log.Warn("ban purge: delete", "channel_id", ch, "err", err)
		}
	}
}

type bulkBanRequest struct {
	UserIDs []reqID `json:"user_ids"`
	banRequest
}

// bulkBan is POST /guilds/{g}/bulk-ban: up to 200 users; the answer lists
// who was banned and who was not.
func (h *moderationHandler) bulkBan(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	var req bulkBanRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if len(req.UserIDs) == 0 {
		return formError("user_ids", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if len(req.UserIDs) > maxBulkBan {
		return formError("user_ids", "BASE_TYPE_MAX_LENGTH", "Must be 200 or fewer in length.")
	}
	secs, err := req.seconds()
	if err != nil {
		return err
	}
	if err := h.guilds.AuthorizeGuild(r.Context(), user, g, permissions.BanMembers|permissions.ManageGuild); err != nil {
		return err
	}
	banned, failed := []snowflake.ID{}, []snowflake.ID{}
	for _, id := range ids(req.UserIDs) {
		if err := h.ban(r, user, g, id, secs); err != nil {
			if errors.Is(err, guild.ErrUnavailable) {
				return err
			}
			failed = append(failed, id)
			continue
		}
		banned = append(banned, id)
	}
	if len(banned) == 0 {
		return errBulkBanFailed
	}
	writeJSON(w, http.StatusOK, map[string]any{"banned_users": banned, "failed_users": failed})
	return nil
}

// deleteBan is DELETE /guilds/{g}/bans/{u}.
func (h *moderationHandler) deleteBan(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, target, err := banPath(r)
	if err != nil {
		return err
	}
	if err := h.members.Unban(r.Context(), user, g, target); err != nil {
		return err
	}
	h.recordAudit(r, g, user, auditEntry{Action: auditMemberBanRemove, Target: target})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type wireBan struct {
	Reason *string   `json:"reason"`
	User   wire.User `json:"user"`
}

func (h *moderationHandler) banJSON(ctx context.Context, b store.Ban) wireBan {
	out := wireBan{User: h.userOrGhost(ctx, b.UserID)}
	if b.Reason != "" {
		r := b.Reason
		out.Reason = &r
	}
	return out
}

// getBan is GET /guilds/{g}/bans/{u} (BAN_MEMBERS).
func (h *moderationHandler) getBan(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, target, err := banPath(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := h.guilds.AuthorizeGuild(ctx, user, g, permissions.BanMembers); err != nil {
		return err
	}
	b, err := h.store.GetBan(ctx, g, target)
	if errors.Is(err, store.ErrNotFound) {
		return guild.ErrUnknownBan
	}
	if err != nil {
		return joinUnavailable(err)
	}
	writeJSON(w, http.StatusOK, h.banJSON(ctx, b))
	return nil
}

// listBans is GET /guilds/{g}/bans?limit=1..1000&before&after (BAN_MEMBERS).
func (h *moderationHandler) listBans(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1000, 1, 1000)
	if err != nil {
		return err
	}
	before, err := queryID(r, "before")
	if err != nil {
		return err
	}
	after, err := queryID(r, "after")
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := h.guilds.AuthorizeGuild(ctx, user, g, permissions.BanMembers); err != nil {
		return err
	}
	bans, err := h.store.ListBans(ctx, g, before, after, limit)
	if err != nil {
		return joinUnavailable(err)
	}
	out := make([]wireBan, 0, len(bans))
	for _, b := range bans {
		out = append(out, h.banJSON(ctx, b))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func timeSeconds(s int) time.Duration { return time.Duration(s) * time.Second }
