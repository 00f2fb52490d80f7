package apirole

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// historyStore is a channel's history for the deduper, counting reads.
type historyStore struct {
	store.Messages
	msgs  []store.Message
	reads atomic.Int32
}

func (s *historyStore) ListMessages(_ context.Context, channelID snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	s.reads.Add(1)
	var out []store.Message
	for _, m := range s.msgs {
		if m.ChannelID == channelID && len(out) < q.Limit {
			out = append(out, m)
		}
	}
	return out, nil
}

// TestPriorSendOnlyForRetriedSends: the deduper finds the author's
// message with the nonce, in that channel, only for a send the API node
// marked as retried; other sends cost no history read.
func TestPriorSendOnlyForRetriedSends(t *testing.T) {
	st := &historyStore{msgs: []store.Message{
		{ID: 30, ChannelID: 5, AuthorID: 8, Nonce: "other"},
		{ID: 20, ChannelID: 5, AuthorID: 7, Nonce: "#42"},
		{ID: 10, ChannelID: 6, AuthorID: 7, Nonce: "n"},
	}}
	d := &sendDeduper{store: st, log: slog.New(slog.DiscardHandler)}
	fresh := httptest.NewRequest("POST", "/api/v10/channels/5/messages", nil)
	if _, ok := d.priorSend(fresh, 5, 7, "#42"); ok || st.reads.Load() != 0 {
		t.Fatalf("a first attempt was looked up (%d reads)", st.reads.Load())
	}
	retried := httptest.NewRequest("POST", "/api/v10/channels/5/messages", nil)
	retried.Header.Set(retryHeader, "1")
	if id, ok := d.priorSend(retried, 5, 7, "#42"); !ok || id != 20 {
		t.Fatalf("retried send found %d, %v; want message 20", id, ok)
	}
	for _, c := range []struct {
		channel, author snowflake.ID
		nonce           string
	}{{5, 8, "#42"}, {5, 7, "42"}, {6, 7, "#42"}, {5, 7, "n"}} {
		if id, ok := d.priorSend(retried, c.channel, c.author, c.nonce); ok {
			t.Errorf("%+v matched message %d", c, id)
		}
	}
}
