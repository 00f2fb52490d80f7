package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/dataservice"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// DataClient is a store.Messages that sends every operation on a channel
// to the data node owning the channel on the data ring (a LocalRing over
// dataservice.Role), with the semantics of dataservice.Router: a call
// that fails because the node is unreachable, stopping or its store is
// unavailable is retried with backoff on whatever node owns the channel
// by then (the new owner once the registry dropped the dead one).
// store.ErrNotFound and store.ErrUnavailable cross the wire: errors.Is
// matches them on the returned errors.
type DataClient interface {
	store.Messages
	// Close ends every connection.
	Close() error
}

type dataClient struct {
	*dataservice.Router
	pool *pool
}

// DataClientConfig tunes a DataClient's retries; zero fields take the
// dataservice.RouterConfig defaults.
type DataClientConfig struct {
	// MaxAttempts bounds the tries of one operation (the first included).
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled for each next.
	Backoff time.Duration
}

// NewDataClient returns a DataClient routing by ring.
func NewDataClient(cfg ClientConfig, dcfg DataClientConfig, ring dataservice.Ring) (DataClient, error) {
	cfg.fill()
	c := &dataClient{pool: newPool(cfg.MaxMsgSize)}
	errs := newErrorTable(cfg.Errors)
	r, err := dataservice.NewRouter(dataservice.RouterConfig{
		Ring:        ring,
		MaxAttempts: dcfg.MaxAttempts,
		Backoff:     dcfg.Backoff,
		Logger:      cfg.Logger,
		Dial: func(_ context.Context, n registry.Node) (store.Messages, error) {
			return &dataNodeClient{node: n, pool: c.pool, errs: errs, timeout: cfg.CallTimeout}, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("transport: data client: %w", err)
	}
	c.Router = r
	return c, nil
}

// Close implements DataClient.
func (c *dataClient) Close() error {
	c.pool.close()
	return nil
}

// dataNodeClient is the store.Messages of one data node.
type dataNodeClient struct {
	node    registry.Node
	pool    *pool
	errs    errorTable
	timeout time.Duration
}

// call runs fn on the node's connection and maps its error; an
// unreachable or closing node also matches store.ErrUnavailable, which
// the Router retries.
func (c *dataNodeClient) call(ctx context.Context, method string, ch snowflake.ID, fn func(context.Context, transportpb.DataNodeClient) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	conn, err := c.pool.get(c.node.Addr)
	if err == nil {
		err = c.errs.fromStatus(fn(ctx, transportpb.NewDataNodeClient(conn)))
	}
	if err == nil {
		clientCalls.WithLabelValues("Data"+method, "ok").Inc()
		return nil
	}
	clientCalls.WithLabelValues("Data"+method, "error").Inc()
	if (errors.Is(err, ErrUnavailable) || errors.Is(err, dataservice.ErrClosed)) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("transport: %s channel %d on %s: %w: %w", method, ch, c.node.Name, store.ErrUnavailable, err)
	}
	return fmt.Errorf("transport: %s channel %d on %s: %w", method, ch, c.node.Name, err)
}

func (c *dataNodeClient) PutMessage(ctx context.Context, m store.Message) error {
	req := &transportpb.PutMessageRequest{Message: messageToPB(m)}
	return c.call(ctx, "PutMessage", m.ChannelID, func(ctx context.Context, d transportpb.DataNodeClient) error {
		_, err := d.PutMessage(ctx, req)
		return err
	})
}

func (c *dataNodeClient) GetMessage(ctx context.Context, ch, id snowflake.ID) (store.Message, error) {
	var out store.Message
	err := c.call(ctx, "GetMessage", ch, func(ctx context.Context, d transportpb.DataNodeClient) error {
		resp, err := d.GetMessage(ctx, &transportpb.GetMessageRequest{ChannelId: uint64(ch), MessageId: uint64(id)})
		if err == nil {
			out = messageFromPB(resp.Message)
		}
		return err
	})
	return out, err
}

func (c *dataNodeClient) DeleteMessage(ctx context.Context, ch, id snowflake.ID) error {
	return c.call(ctx, "DeleteMessage", ch, func(ctx context.Context, d transportpb.DataNodeClient) error {
		_, err := d.DeleteMessage(ctx, &transportpb.DeleteMessageRequest{ChannelId: uint64(ch), MessageId: uint64(id)})
		return err
	})
}

func (c *dataNodeClient) DeleteMessages(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	return c.call(ctx, "DeleteMessages", ch, func(ctx context.Context, d transportpb.DataNodeClient) error {
		_, err := d.DeleteMessages(ctx, &transportpb.DeleteMessagesRequest{ChannelId: uint64(ch), MessageIds: idsToPB(ids)})
		return err
	})
}

func (c *dataNodeClient) ListMessages(ctx context.Context, ch snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	var out []store.Message
	err := c.call(ctx, "ListMessages", ch, func(ctx context.Context, d transportpb.DataNodeClient) error {
		resp, err := d.ListMessages(ctx, &transportpb.ListMessagesRequest{
			ChannelId: uint64(ch), Before: uint64(q.Before), After: uint64(q.After), Around: uint64(q.Around), Limit: int32(q.Limit),
		})
		if err != nil {
			return err
		}
		out = make([]store.Message, len(resp.Messages))
		for i, m := range resp.Messages {
			out[i] = messageFromPB(m)
		}
		return nil
	})
	return out, err
}

func (c *dataNodeClient) Buckets(ctx context.Context, ch snowflake.ID) ([]int64, error) {
	var out []int64
	err := c.call(ctx, "Buckets", ch, func(ctx context.Context, d transportpb.DataNodeClient) error {
		resp, err := d.Buckets(ctx, &transportpb.BucketsRequest{ChannelId: uint64(ch)})
		if err == nil {
			out = resp.Buckets
		}
		return err
	})
	return out, err
}

// PutMessageEvents implements store.MessageEvents: the message and its
// events travel in one PutMessage, and the data node commits them in its
// store's one atomic write.
func (c *dataNodeClient) PutMessageEvents(ctx context.Context, m store.Message, events ...store.Event) error {
	req := &transportpb.PutMessageRequest{Message: messageToPB(m), Events: eventsToPB(events)}
	return c.call(ctx, "PutMessage", m.ChannelID, func(ctx context.Context, d transportpb.DataNodeClient) error {
		_, err := d.PutMessage(ctx, req)
		return err
	})
}

// DeleteMessagesEvents implements store.MessageEvents in one
// DeleteMessages.
func (c *dataNodeClient) DeleteMessagesEvents(ctx context.Context, ch snowflake.ID, ids []snowflake.ID, events ...store.Event) error {
	req := &transportpb.DeleteMessagesRequest{ChannelId: uint64(ch), MessageIds: idsToPB(ids), Events: eventsToPB(events)}
	return c.call(ctx, "DeleteMessages", ch, func(ctx context.Context, d transportpb.DataNodeClient) error {
		_, err := d.DeleteMessages(ctx, req)
		return err
	})
}
