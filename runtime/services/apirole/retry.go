package apirole

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/edge/api"
)

// retryHeader marks a request the API node sends again because the guild
// node serving it died before answering: it may have been applied.
const retryHeader = "X-Concord-Retry"

// retryScan is how many of a channel's newest messages a retried send
// looks through for the one the dead node may have written.
const retryScan = 100

// sendDeduper makes a retried message send with enforce_nonce idempotent
// across nodes: the REST API remembers nonces in process memory, which
// died with the node that wrote the first attempt, so on the new owner
// the API asks it (api.Deps.PriorSend) and it looks for the author's
// message with that nonce among the channel's newest messages; the API
// then answers with that message instead of writing it again. Such a
// message reaches history but was never pushed live (its writer died
// before the fan-out). Only sends the API node marked as retried
// (retryHeader) pay for the lookup.
type sendDeduper struct {
	store store.Messages
	log   *slog.Logger
}

// priorSend implements api.PriorSend.
func (d *sendDeduper) priorSend(r *http.Request, channelID, author snowflake.ID, nonce string) (snowflake.ID, bool) {
	if r.Header.Get(retryHeader) == "" {
		return 0, false
	}
	id, ok := d.find(r.Context(), channelID, author, nonce)
	if !ok {
		d.log.Info("retried send not written before: sending it", "channel_id", channelID, "user_id", author)
		return 0, false
	}
	d.log.Info("retried send already written by the node that died: answering with it",
		"channel_id", channelID, "message_id", id, "user_id", author)
	return id, true
}

// find looks for user's message with nonce among the channel's newest.
func (d *sendDeduper) find(ctx context.Context, channelID, user snowflake.ID, nonce string) (snowflake.ID, bool) {
	ms, err := d.store.ListMessages(ctx, channelID, store.HistoryQuery{Limit: retryScan})
	if err != nil {
		d.log.Warn("retried send: history not read, sending it", "channel_id", channelID, "err", err)
		return 0, false
	}
	for _, m := range ms {
		if m.AuthorID == user && m.Nonce == nonce {
			return m.ID, true
		}
	}
	return 0, false
}

var _ api.PriorSend = (*sendDeduper)(nil).priorSend
