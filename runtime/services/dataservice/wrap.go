package dataservice

import (
	"context"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Wrap returns a store.Store whose message methods go to msgs (a Service
// in one process, a Router on API nodes) and everything else — guild
// state, accounts, Close — to st. It is how a process puts the data
// service in front of its store without its callers knowing.
//
// When msgs commits events with message writes (EventWriter) and st has
// the outbox, the result is a store.TransactionalOutbox: event writes go
// through msgs like every message write, the outbox is read from st.
func Wrap(st store.Store, msgs store.Messages) store.Store {
	w := &wrapped{Store: st, msgs: msgs}
	ew, ok := msgs.(EventWriter)
	if !ok || !ew.CommitsEvents() {
		return w
	}
	ob, ok := st.(store.Outbox)
	if !ok {
		return w
	}
	tx := &wrappedTx{wrapped: w, events: ew, outbox: ob}
	if rng, ok := st.(store.OutboxRange); ok {
		return &wrappedTxRange{wrappedTx: tx, rng: rng}
	}
	return tx
}

type wrapped struct {
	store.Store
	msgs store.Messages
}

func (w *wrapped) PutMessage(ctx context.Context, m store.Message) error {
	return w.msgs.PutMessage(ctx, m)
}

func (w *wrapped) GetMessage(ctx context.Context, ch, id snowflake.ID) (store.Message, error) {
	return w.msgs.GetMessage(ctx, ch, id)
}

func (w *wrapped) DeleteMessage(ctx context.Context, ch, id snowflake.ID) error {
	return w.msgs.DeleteMessage(ctx, ch, id)
}

func (w *wrapped) DeleteMessages(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	return w.msgs.DeleteMessages(ctx, ch, ids)
}

func (w *wrapped) ListMessages(ctx context.Context, ch snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	return w.msgs.ListMessages(ctx, ch, q)
}

func (w *wrapped) Buckets(ctx context.Context, ch snowflake.ID) ([]int64, error) {
	return w.msgs.Buckets(ctx, ch)
}

// Unwrap returns the store Wrap was given, for callers that need the
// adapter itself (e.g. to share its Cassandra session).
func (w *wrapped) Unwrap() store.Store { return w.Store }
