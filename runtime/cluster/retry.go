package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// retryHeader marks a request the API node sends again because the guild
// node serving it died before answering: it may have been applied.
const retryHeader = "X-Concord-Retry"

// retryScan is how many of a channel's newest messages a retried send
// looks through for the one the dead node may have written.
const retryScan = 100

// sendDeduper makes a retried message send with enforce_nonce idempotent
// across nodes: the REST API remembers nonces in process memory, which
// died with the node that wrote the first attempt, so the new owner looks
// for the author's message with that nonce among the channel's newest
// messages and answers with it instead of writing it again. Such a
// message reaches history but was never pushed live (its writer died
// before the fan-out).
type sendDeduper struct {
	store store.Messages
	auth  *auth.Issuer
	api   http.Handler
	log   *slog.Logger
}

// serve answers r when it is a retried send whose message exists; false
// means the caller must serve r (whose body it restored).
func (d *sendDeduper) serve(w http.ResponseWriter, r *http.Request, channelID snowflake.ID) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxProxyBody))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var req struct {
		Nonce        json.RawMessage `json:"nonce"`
		EnforceNonce bool            `json:"enforce_nonce"`
	}
	if json.Unmarshal(body, &req) != nil || !req.EnforceNonce {
		return false
	}
	nonce := storedNonce(req.Nonce)
	if nonce == "" {
		return false
	}
	user, err := d.auth.Verify(r.Context(), auth.StripPrefix(r.Header.Get("Authorization")))
	if err != nil {
		return false
	}
	id, ok := d.find(r.Context(), channelID, user, nonce)
	if !ok {
		d.log.Info("retried send not written before: sending it", "channel_id", channelID, "user_id", user)
		return false
	}
	d.log.Info("retried send already written by the node that died: answering with it",
		"channel_id", channelID, "message_id", id, "user_id", user)
	// Answer as GET /channels/{c}/messages/{id} would, rendered by the
	// REST API itself.
	get := r.Clone(r.Context())
	get.Method = http.MethodGet
	get.URL.Path = "/api/v10/channels/" + channelID.String() + "/messages/" + id.String()
	get.URL.RawPath = ""
	get.URL.RawQuery = ""
	get.Body, get.ContentLength = http.NoBody, 0
	d.api.ServeHTTP(w, get)
	return true
}

// find looks for user's message with nonce among the channel's newest.
func (d *sendDeduper) find(ctx context.Context, channelID, user snowflake.ID, nonce string) (snowflake.ID, bool) {
	ms, err := d.store.ListMessages(ctx, channelID, store.HistoryQuery{Limit: retryScan})
	if err != nil {
		return 0, false
	}
	for _, m := range ms {
		if m.AuthorID == user && m.Nonce == nonce {
			return m.ID, true
		}
	}
	return 0, false
}

// storedNonce is the nonce as the REST API stores it: a string as is, an
// integer as '#' and its digits; "" for none or a malformed one.
func storedNonce(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return ""
	}
	return "#" + strconv.FormatInt(n, 10)
}
