package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Audit log action types, as Discord numbers them.
const (
	auditGuildUpdate       = 1
	auditChannelCreate     = 10
	auditChannelUpdate     = 11
	auditChannelDelete     = 12
	auditOverwriteCreate   = 13
	auditOverwriteUpdate   = 14
	auditOverwriteDelete   = 15
	auditMemberKick        = 20
	auditMemberBanAdd      = 22
	auditMemberBanRemove   = 23
	auditMemberUpdate      = 24
	auditMemberRoleUpdate  = 25
	auditRoleCreate        = 30
	auditRoleUpdate        = 31
	auditRoleDelete        = 32
	auditInviteCreate      = 40
	auditInviteDelete      = 42
	auditMessageDelete     = 72
	auditMessageBulkDelete = 73
)

// maxAuditReason is Discord's limit on X-Audit-Log-Reason.
const maxAuditReason = 512

// auditChange is one entry of an audit log entry's changes.
type auditChange struct {
	Key      string          `json:"key"`
	NewValue json.RawMessage `json:"new_value,omitempty"`
	OldValue json.RawMessage `json:"old_value,omitempty"`
}

// auditEntry is what a handler records about an action.
type auditEntry struct {
	Action  int
	Target  snowflake.ID
	Changes []auditChange
	Options map[string]any
}

// auditReason reads X-Audit-Log-Reason: URL-encoded (as the libraries
// send it), at most 512 characters.
func auditReason(r *http.Request) string {
	s := r.Header.Get("X-Audit-Log-Reason")
	if s == "" {
		return ""
	}
	if u, err := url.PathUnescape(s); err == nil {
		s = u
	}
	if utf8.RuneCountInString(s) > maxAuditReason {
		s = string([]rune(s)[:maxAuditReason])
	}
	return s
}

// recordAudit appends an entry to the guild's audit log and sends
// GUILD_AUDIT_LOG_ENTRY_CREATE to sessions allowed to read the log. The
// action already happened: a failure is logged, not returned.
func (a *auditor) recordAudit(r *http.Request, guildID, user snowflake.ID, e auditEntry) {
	if guildID == 0 {
		return
	}
	ctx, cancel := background(r.Context())
	defer cancel()
	id, err := a.ids.Next()
	if err != nil {
		a.log.Warn("audit entry not recorded", "guild_id", guildID, "action", e.Action, "err", err)
		return
	}
	se := store.AuditEntry{ID: id, GuildID: guildID, UserID: user, TargetID: e.Target, ActionType: e.Action, Reason: auditReason(r)}
	if len(e.Changes) > 0 {
		b, _ := json.Marshal(e.Changes)
		se.Changes = string(b)
	}
	if len(e.Options) > 0 {
		opts := make(map[string]string, len(e.Options))
		for k, v := range e.Options {
			switch v := v.(type) {
			case string:
				opts[k] = v
			case snowflake.ID:
				opts[k] = v.String()
			case int:
				opts[k] = strconv.Itoa(v)
			default:
				b, _ := json.Marshal(v)
				opts[k] = string(b)
			}
		}
		b, _ := json.Marshal(opts)
		se.Options = string(b)
	}
	if err := a.store.AppendAudit(ctx, se); err != nil {
		a.log.Warn("audit entry not recorded", "guild_id", guildID, "action", e.Action, "err", err)
		return
	}
	ev := struct {
		wireAuditEntry
		GuildID snowflake.ID `json:"guild_id"`
	}{auditJSON(se), guildID}
	if err := a.guilds.PublishModeration(ctx, guildID, "GUILD_AUDIT_LOG_ENTRY_CREATE", ev, permissions.ViewAuditLog); err != nil {
		a.log.Warn("audit entry not published", "guild_id", guildID, "err", err)
	}
}

// wireAuditEntry is Discord's audit log entry object.
type wireAuditEntry struct {
	ID         snowflake.ID      `json:"id"`
	UserID     *snowflake.ID     `json:"user_id"`
	TargetID   *string           `json:"target_id"`
	ActionType int               `json:"action_type"`
	Changes    json.RawMessage   `json:"changes,omitempty"`
	Options    map[string]string `json:"options,omitempty"`
	Reason     *string           `json:"reason,omitempty"`
}

func auditJSON(e store.AuditEntry) wireAuditEntry {
	out := wireAuditEntry{ID: e.ID, ActionType: e.ActionType}
	if e.UserID != 0 {
		u := e.UserID
		out.UserID = &u
	}
	if e.TargetID != 0 {
		t := e.TargetID.String()
		out.TargetID = &t
	}
	if e.Changes != "" {
		out.Changes = json.RawMessage(e.Changes)
	}
	if e.Options != "" {
		_ = json.Unmarshal([]byte(e.Options), &out.Options)
	}
	if e.Reason != "" {
		r := e.Reason
		out.Reason = &r
	}
	return out
}

// getAuditLog is GET /guilds/{g}/audit-logs?user_id&action_type&before&
// after&limit (VIEW_AUDIT_LOG).
func (h *moderationHandler) getAuditLog(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	g, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	var q store.AuditQuery
	if q.Limit, err = queryInt(r, "limit", 50, 1, 100); err != nil {
		return err
	}
	if q.ActionType, err = queryInt(r, "action_type", 0, 0, 1<<16); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		dst  *snowflake.ID
	}{{"user_id", &q.UserID}, {"before", &q.Before}, {"after", &q.After}} {
		if *c.dst, err = queryID(r, c.name); err != nil {
			return err
		}
	}
	ctx := r.Context()
	if err := h.guilds.AuthorizeGuild(ctx, user, g, permissions.ViewAuditLog); err != nil {
		return err
	}
	es, err := h.store.ListAudit(ctx, g, q)
	if err != nil {
		return joinUnavailable(err)
	}
	entries := make([]wireAuditEntry, 0, len(es))
	users := []wire.User{}
	seen := map[snowflake.ID]bool{}
	addUser := func(id snowflake.ID) {
		if id == 0 || seen[id] {
			return
		}
		seen[id] = true
		if u, err := h.guilds.User(ctx, id); err == nil {
			users = append(users, u)
		}
	}
	for _, e := range es {
		entries = append(entries, auditJSON(e))
		addUser(e.UserID)
		if e.ActionType >= auditMemberKick && e.ActionType <= auditMemberRoleUpdate || e.ActionType == auditMessageDelete {
			addUser(e.TargetID)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"audit_log_entries": entries, "users": users, "integrations": []any{}, "webhooks": []any{},
		"guild_scheduled_events": []any{}, "threads": []any{}, "application_commands": []any{}, "auto_moderation_rules": []any{},
	})
	return nil
}

// joinUnavailable marks a store failure as a 503.
func joinUnavailable(err error) error { return errors.Join(guild.ErrUnavailable, err) }
