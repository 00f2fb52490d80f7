package dataservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Role is the registry role of data service instances (--roles=data).
const Role = registry.RoleData

// Ring names the instance that owns a channel: *registry.LocalRing
// watching Role satisfies it.
type Ring interface {
	Owner(id snowflake.ID) (registry.Node, bool)
}

var _ Ring = (*registry.LocalRing)(nil)

// Dialer returns the client of one instance (a gRPC client in a
// multi-process deployment, the *Service itself in one process). The
// Router calls it once per instance name and keeps the result until the
// call through it fails as retryable.
type Dialer func(ctx context.Context, node registry.Node) (store.Messages, error)

// RouterConfig configures a Router.
type RouterConfig struct {
	// Ring picks each channel's instance. Required.
	Ring Ring
	// Dial connects to an instance. Required.
	Dial Dialer
	// MaxAttempts bounds the tries of one request (the first included).
	// Default: 6.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled for each next
	// one up to one second. Default: 50ms.
	Backoff time.Duration
	// Logger. Default: slog.Default().
	Logger *slog.Logger
}

var routerRetries = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "concord_dataservice_router_retries_total",
	Help: "Requests an API node retried because the owning data instance failed (by op).",
}, []string{"op"})

// Router is what API nodes use as their store.Messages: it sends each
// request to the instance owning the channel and, when that instance fails
// (closed, unreachable, or its store unavailable), retries with backoff on
// whatever instance owns the channel by then.
type Router struct {
	cfg RouterConfig
	log *slog.Logger

	mu      sync.Mutex
	clients map[string]store.Messages
}

var _ store.Messages = (*Router)(nil)

// NewRouter returns a Router.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Ring == nil || cfg.Dial == nil {
		return nil, errors.New("dataservice: RouterConfig needs Ring and Dial")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 6
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Router{cfg: cfg, log: cfg.Logger.With("component", "dataservice-router"), clients: map[string]store.Messages{}}, nil
}

func (r *Router) client(ctx context.Context, ch snowflake.ID) (string, store.Messages, error) {
	node, ok := r.cfg.Ring.Owner(ch)
	if !ok {
		return "", nil, ErrNoInstance
	}
	r.mu.Lock()
	c := r.clients[node.Name]
	r.mu.Unlock()
	if c != nil {
		return node.Name, c, nil
	}
	c, err := r.cfg.Dial(ctx, node)
	if err != nil {
		return node.Name, nil, fmt.Errorf("dataservice: dial %s: %w: %w", node.Name, store.ErrUnavailable, err)
	}
	r.mu.Lock()
	if prev := r.clients[node.Name]; prev != nil {
		c = prev
	} else {
		r.clients[node.Name] = c
	}
	r.mu.Unlock()
	return node.Name, c, nil
}

func (r *Router) forget(name string) {
	r.mu.Lock()
	delete(r.clients, name)
	r.mu.Unlock()
}

// do runs fn on the channel's owner, retrying retryable failures.
func (r *Router) do(ctx context.Context, op string, ch snowflake.ID, fn func(store.Messages, int) error) error {
	wait := r.cfg.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		var name string
		var c store.Messages
		name, c, err = r.client(ctx, ch)
		if err == nil {
			err = fn(c, attempt)
			if err == nil || !IsRetryable(err) {
				return err
			}
			r.forget(name)
		}
		if attempt >= r.cfg.MaxAttempts || ctx.Err() != nil {
			return err
		}
		routerRetries.WithLabelValues(op).Inc()
		r.log.Debug("retrying on the channel's owner", "op", op, "channel_id", ch, "instance", name, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// ListMessages reads a page of history from the channel's owner.
func (r *Router) ListMessages(ctx context.Context, ch snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	var out []store.Message
	err := r.do(ctx, "list", ch, func(c store.Messages, _ int) (err error) {
		out, err = c.ListMessages(ctx, ch, q)
		return err
	})
	return out, err
}

// GetMessage reads one message from the channel's owner.
func (r *Router) GetMessage(ctx context.Context, ch, id snowflake.ID) (store.Message, error) {
	var out store.Message
	err := r.do(ctx, "get", ch, func(c store.Messages, _ int) (err error) {
		out, err = c.GetMessage(ctx, ch, id)
		return err
	})
	return out, err
}

// Buckets lists the channel's non-empty buckets from its owner.
func (r *Router) Buckets(ctx context.Context, ch snowflake.ID) ([]int64, error) {
	var out []int64
	err := r.do(ctx, "buckets", ch, func(c store.Messages, _ int) (err error) {
		out, err = c.Buckets(ctx, ch)
		return err
	})
	return out, err
}

// PutMessage writes through the channel's owner. A retry rewrites the
// same row, which is harmless: writes are idempotent.
func (r *Router) PutMessage(ctx context.Context, m store.Message) error {
	return r.do(ctx, "put", m.ChannelID, func(c store.Messages, _ int) error { return c.PutMessage(ctx, m) })
}

// DeleteMessage deletes through the channel's owner. When a retry finds
// the message gone, the failed attempt deleted it: that is success.
func (r *Router) DeleteMessage(ctx context.Context, ch, id snowflake.ID) error {
	return r.do(ctx, "delete", ch, func(c store.Messages, attempt int) error {
		err := c.DeleteMessage(ctx, ch, id)
		if attempt > 1 && errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
}

// DeleteMessages deletes many messages through the channel's owner.
func (r *Router) DeleteMessages(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	return r.do(ctx, "delete_bulk", ch, func(c store.Messages, _ int) error { return c.DeleteMessages(ctx, ch, ids) })
}
