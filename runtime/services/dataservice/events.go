package dataservice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ErrNoEvents is returned by an event write (store.MessageEvents) on an
// instance whose store cannot commit events with message writes.
var ErrNoEvents = errors.New("dataservice: store does not commit events with message writes")

// EventWriter is a store.Messages that may commit events with message
// writes (the transactional outbox); CommitsEvents says whether it does.
// Service, Router and the data nodes' client implement it, so a send
// through the data service writes the message and its event in the
// store's one atomic write on the node that owns the channel.
type EventWriter interface {
	store.MessageEvents
	CommitsEvents() bool
}

var (
	_ EventWriter = (*Service)(nil)
	_ EventWriter = (*Router)(nil)
)

// CommitsEvents reports whether the Service's store commits events with
// message writes.
func (s *Service) CommitsEvents() bool {
	_, ok := s.store.(store.MessageEvents)
	return ok
}

// PutMessageEvents writes a message with its events in the store's one
// atomic write; like PutMessage it ends the channel's coalescing window.
func (s *Service) PutMessageEvents(ctx context.Context, m store.Message, events ...store.Event) error {
	me, ok := s.store.(store.MessageEvents)
	if !ok {
		return ErrNoEvents
	}
	return s.write(ctx, "put", m.ChannelID, func(ctx context.Context) error { return me.PutMessageEvents(ctx, m, events...) })
}

// DeleteMessagesEvents deletes messages with their events in the store's
// one atomic write.
func (s *Service) DeleteMessagesEvents(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, events ...store.Event) error {
	me, ok := s.store.(store.MessageEvents)
	if !ok {
		return ErrNoEvents
	}
	return s.write(ctx, "delete_bulk", ch, func(ctx context.Context) error { return me.DeleteMessagesEvents(ctx, ch, ids, events...) })
}

// CommitsEvents is true: the owner of each channel decides, and answers
// ErrNoEvents when its store cannot.
func (r *Router) CommitsEvents() bool { return true }

// PutMessageEvents writes through the channel's owner. A retry after a
// failed attempt may commit the events twice, which the event log's
// consumers dedupe by message id.
func (r *Router) PutMessageEvents(ctx context.Context, m store.Message, events ...store.Event) error {
	return r.do(ctx, "put", m.ChannelID, func(c store.Messages, _ int) error {
		me, ok := c.(store.MessageEvents)
		if !ok {
			return fmt.Errorf("%w (%T)", ErrNoEvents, c)
		}
		return me.PutMessageEvents(ctx, m, events...)
	})
}

// DeleteMessagesEvents deletes through the channel's owner.
func (r *Router) DeleteMessagesEvents(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, events ...store.Event) error {
	return r.do(ctx, "delete_bulk", ch, func(c store.Messages, _ int) error {
		me, ok := c.(store.MessageEvents)
		if !ok {
			return fmt.Errorf("%w (%T)", ErrNoEvents, c)
		}
		return me.DeleteMessagesEvents(ctx, ch, ids, events...)
	})
}

// wrappedTx is a wrapped store whose message writes can carry events and
// whose outbox is the store's own: the relay reads the outbox from the
// store directly, since outbox rows are not channel traffic to coalesce.
type wrappedTx struct {
	*wrapped
	events EventWriter
	outbox store.Outbox
}

var _ store.TransactionalOutbox = (*wrappedTx)(nil)

func (w *wrappedTx) PutMessageEvents(ctx context.Context, m store.Message, events ...store.Event) error {
	return w.events.PutMessageEvents(ctx, m, events...)
}

func (w *wrappedTx) DeleteMessagesEvents(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, events ...store.Event) error {
	return w.events.DeleteMessagesEvents(ctx, ch, ids, events...)
}

func (w *wrappedTx) ListOutbox(ctx context.Context, shard, limit int, olderThan time.Duration) ([]store.OutboxEntry, error) {
	return w.outbox.ListOutbox(ctx, shard, limit, olderThan)
}

// wrappedTxRange is a wrappedTx whose store lists outbox windows.
type wrappedTxRange struct {
	*wrappedTx
	rng store.OutboxRange
}

var _ store.OutboxRange = (*wrappedTxRange)(nil)

// ListOutboxRange implements store.OutboxRange with the store's own.
func (w *wrappedTxRange) ListOutboxRange(ctx context.Context, shard, limit int, from, to time.Time) ([]store.OutboxEntry, error) {
	return w.rng.ListOutboxRange(ctx, shard, limit, from, to)
}

func (w *wrappedTx) DeleteOutbox(ctx context.Context, shard int, ids [][]byte) error {
	return w.outbox.DeleteOutbox(ctx, shard, ids)
}
