package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// auditRule says how a management route's success becomes an audit log
// entry.
type auditRule struct {
	action int
	// guildFrom names the path value holding the guild ("guild"), the
	// channel whose guild it is ("channel") or the invite ("invite").
	guildFrom string
	// target names the path value of the target; "id" takes the id of
	// the created object from the response body.
	target string
	// changes records the request body's fields as changes.
	changes bool
}

// auditRules are the audited routes served by other files, keyed by
// pattern without the version prefix. Routes in this package's own
// moderation files (bans, pins) record their entries themselves.
var auditRules = map[string]auditRule{
	"PATCH /guilds/{guild}":                              {auditGuildUpdate, "guild", "guild", true},
	"POST /guilds/{guild}/channels":                      {auditChannelCreate, "guild", "id", true},
	"PATCH /channels/{channel}":                          {auditChannelUpdate, "channel", "channel", true},
	"DELETE /channels/{channel}":                         {auditChannelDelete, "channel", "channel", false},
	"PUT /channels/{channel}/permissions/{target}":       {auditOverwriteCreate, "channel", "channel", true},
	"DELETE /channels/{channel}/permissions/{target}":    {auditOverwriteDelete, "channel", "channel", false},
	"DELETE /guilds/{guild}/members/{user}":              {auditMemberKick, "guild", "user", false},
	"PATCH /guilds/{guild}/members/{user}":               {auditMemberUpdate, "guild", "user", true},
	"PUT /guilds/{guild}/members/{user}/roles/{role}":    {auditMemberRoleUpdate, "guild", "user", false},
	"DELETE /guilds/{guild}/members/{user}/roles/{role}": {auditMemberRoleUpdate, "guild", "user", false},
	"POST /guilds/{guild}/roles":                         {auditRoleCreate, "guild", "id", true},
	"PATCH /guilds/{guild}/roles/{role}":                 {auditRoleUpdate, "guild", "role", true},
	"DELETE /guilds/{guild}/roles/{role}":                {auditRoleDelete, "guild", "role", false},
	"DELETE /channels/{channel}/messages/{message}":      {auditMessageDelete, "channel", "author", false},
	"POST /channels/{channel}/messages/bulk-delete":      {auditMessageBulkDelete, "channel", "channel", false},
	"POST /channels/{channel}/invites":                   {auditInviteCreate, "channel", "", false},
	"DELETE /invites/{code}":                             {auditInviteDelete, "invite", "", false},
}

// auditTrail serves mux and records an audit log entry for each
// successful request to an audited route: who acted (the token's user),
// on what, the X-Audit-Log-Reason and, for edits, the fields changed.
// Guilds are resolved before the request runs (a deleted channel's guild
// is gone afterwards), as is the author of a deleted message: a message
// deleted by its author is not a moderation action.
func (h *handler) auditTrail(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mux.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		rule, ok := auditRules[unversioned(pattern)]
		if !ok {
			mux.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		user, err := h.authenticate(r)
		if err != nil {
			mux.ServeHTTP(w, r)
			return
		}
		seg := pathSegments(r.URL.Path)
		var guildID, author snowflake.ID
		// An overwrite's entry says whether it was created or changed,
		// and of what type it is (a deleted one's type is gone after).
		var prior *store.Overwrite
		switch rule.guildFrom {
		case "invite":
			if inv, err := h.store.GetInvite(ctx, seg["invites"]); err == nil {
				guildID = inv.GuildID
			}
		case "channel":
			if ch, err := snowflake.Parse(seg["channels"]); err == nil {
				guildID, _ = h.guilds.ChannelGuild(ctx, ch)
				if rule.action == auditOverwriteCreate || rule.action == auditOverwriteDelete {
					prior = priorOverwrite(ctx, h.store, ch, seg["permissions"])
				}
				if rule.target == "author" {
					if mid, err := snowflake.Parse(seg["messages"]); err == nil {
						if m, err := h.store.GetMessage(ctx, ch, mid); err == nil {
							author = m.AuthorID
						}
					}
				}
			}
		default:
			guildID, _ = snowflake.Parse(seg["guilds"])
		}
		var body []byte
		if rule.changes && r.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(r.Body, int64(h.bodyLimit)+1))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := &auditRecorder{ResponseWriter: w}
		mux.ServeHTTP(rec, r)
		if rec.status/100 != 2 || guildID == 0 {
			return
		}
		e := auditEntry{Action: rule.action}
		switch rule.target {
		case "id":
			var created struct {
				ID snowflake.ID `json:"id"`
			}
			_ = json.Unmarshal(rec.body.Bytes(), &created)
			e.Target = created.ID
		case "author":
			if author == 0 || author == user {
				return
			}
			e.Target = author
			e.Options = map[string]any{"channel_id": seg["channels"], "count": "1"}
		case "":
		default:
			e.Target, _ = snowflake.Parse(r.PathValue(rule.target))
		}
		switch rule.action {
		case auditMemberKick:
			if r.PathValue("user") == "@me" || e.Target == user {
				return // leaving is not a kick
			}
		case auditMemberUpdate:
			if r.PathValue("user") == "@me" {
				e.Target = user
			}
		case auditMemberRoleUpdate:
			key := "$add"
			if r.Method == http.MethodDelete {
				key = "$remove"
			}
			v, _ := json.Marshal([]map[string]string{{"id": r.PathValue("role")}})
			e.Changes = []auditChange{{Key: key, NewValue: v}}
		case auditOverwriteCreate, auditOverwriteDelete:
			// options.type is the overwritten entity's, as a string:
			// "0" a role, "1" a member.
			typ := -1
			if prior != nil {
				typ = prior.Type
			}
			if rule.action == auditOverwriteCreate {
				if prior != nil {
					e.Action = auditOverwriteUpdate
				}
				var req struct {
					Type *int `json:"type"`
				}
				if json.Unmarshal(body, &req) == nil && req.Type != nil {
					typ = *req.Type
				}
			}
			e.Options = map[string]any{"id": r.PathValue("target")}
			if typ >= 0 {
				e.Options["type"] = strconv.Itoa(typ)
			}
		case auditMessageBulkDelete:
			var req bulkDeleteRequest
			_ = json.Unmarshal(body, &req)
			e.Options = map[string]any{"count": len(req.Messages)}
		case auditInviteCreate:
			var inv struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(rec.body.Bytes(), &inv)
			v, _ := json.Marshal(inv.Code)
			e.Changes = []auditChange{{Key: "code", NewValue: v}}
		case auditInviteDelete:
			v, _ := json.Marshal(r.PathValue("code"))
			e.Changes = []auditChange{{Key: "code", OldValue: v}}
		}
		if rule.changes && len(e.Changes) == 0 {
			e.Changes = bodyChanges(body)
		}
		h.recordAudit(r, guildID, user, e)
	})
}

// bodyChanges turns a JSON object body into changes (new values only).
func bodyChanges(body []byte) []auditChange {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	out := make([]auditChange, 0, len(obj))
	for k, v := range obj {
		out = append(out, auditChange{Key: k, NewValue: v})
	}
	return out
}

// priorOverwrite is channel ch's overwrite for target before a request
// changes it (nil: none, or unknown).
func priorOverwrite(ctx context.Context, st store.Store, ch snowflake.ID, target string) *store.Overwrite {
	id, err := snowflake.Parse(target)
	if err != nil {
		return nil
	}
	c, err := st.GetChannel(ctx, ch)
	if err != nil {
		return nil
	}
	for _, o := range c.Overwrites {
		if o.ID == id {
			return &o
		}
	}
	return nil
}

// unversioned drops the method's "/api/vN" path prefix from a pattern.
func unversioned(pattern string) string {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return pattern
	}
	for _, p := range []string{"/api/v9", "/api/v10"} {
		if rest, ok := strings.CutPrefix(path, p); ok {
			return method + " " + rest
		}
	}
	return pattern
}

// pathSegments maps each path segment to the one after it
// ("channels" → "123").
func pathSegments(path string) map[string]string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	out := make(map[string]string, len(parts))
	for i := 0; i+1 < len(parts); i++ {
		if _, seen := out[parts[i]]; !seen {
			out[parts[i]] = parts[i+1]
		}
	}
	return out
}

// auditRecorder keeps the status and up to 64 KiB of the body.
type auditRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *auditRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len() < 64<<10 {
		w.body.Write(b[:min(len(b), 64<<10-w.body.Len())])
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *auditRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
