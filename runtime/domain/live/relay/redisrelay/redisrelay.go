// Package redisrelay is the live.Relay of split deployments: Redis
// pub/sub, one channel per stream ("<prefix>live:<stream id>"). A gateway
// holds one pub/sub connection and subscribes to the channels of the
// streams its viewers watch, so each batch crosses the backbone once per
// subscribed gateway, never once per viewer. Delivery is fire and forget:
// messages published while a connection is being re-established are lost
// and the gateway refills the gap from the recent cache.
package redisrelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Config configures a Relay.
type Config struct {
	// Client, when set, is the process's Redis client, shared with its
	// other adapters (each backend is opened once per process): the
	// relay takes one connection of its pool for pub/sub and publishes
	// on the rest; Close leaves the client open. Addr, DB and the
	// credentials are then the client's business.
	Client *goredis.Client
	// Addr is host:port. Required without Client.
	Addr               string
	DB                 int
	Username, Password string
	// Prefix is prepended to every channel (default "concord:").
	Prefix string
	Logger *slog.Logger
}

// Relay is a live.Relay on Redis pub/sub.
type Relay struct {
	c      *goredis.Client
	own    bool // c was dialled by New (Close closes it)
	prefix string
	log    *slog.Logger
	ps     *goredis.PubSub
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	subs    map[string]map[*sub]struct{}
	waiting map[string][]chan struct{}
}

type sub struct{ gate *live.Gated }

var _ live.Relay = (*Relay)(nil)

// New connects and starts the connection's reader.
func New(ctx context.Context, cfg Config) (*Relay, error) {
	if cfg.Addr == "" && cfg.Client == nil {
		return nil, fmt.Errorf("%w: redisrelay: Addr is required", live.ErrInvalid)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "concord:"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c, own := cfg.Client, cfg.Client == nil
	if own {
		c = goredis.NewClient(&goredis.Options{Addr: cfg.Addr, DB: cfg.DB, Username: cfg.Username, Password: cfg.Password,
			DisableIdentity: true, ClientName: "concord-live-relay", ContextTimeoutEnabled: true})
	}
	if err := c.Ping(ctx).Err(); err != nil {
		if own {
			c.Close()
		}
		return nil, fmt.Errorf("%w: redis %s: %v", live.ErrUnavailable, c.Options().Addr, err)
	}
	r := &Relay{c: c, own: own, prefix: cfg.Prefix + "live:", log: cfg.Logger.With("component", "live-relay"),
		subs: map[string]map[*sub]struct{}{}, waiting: map[string][]chan struct{}{}, done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.ps = c.Subscribe(r.ctx)
	go r.read()
	return r, nil
}

// Close stops the reader and closes the connections (of a shared Client,
// only the pub/sub one).
func (r *Relay) Close() error {
	r.cancel()
	err := r.ps.Close()
	<-r.done
	if !r.own {
		return err
	}
	return errors.Join(err, r.c.Close())
}

func (r *Relay) channel(stream snowflake.ID) string { return r.prefix + stream.String() }

// Publish implements live.Relay.
func (r *Relay) Publish(ctx context.Context, stream snowflake.ID, msg []byte) error {
	_, err := r.PublishCount(ctx, stream, msg)
	return err
}

// PublishCount implements live.CountingRelay: PUBLISH answers with the
// number of subscribed connections, one per gateway process.
func (r *Relay) PublishCount(ctx context.Context, stream snowflake.ID, msg []byte) (int, error) {
	n, err := r.c.Publish(ctx, r.channel(stream), msg).Result()
	if err != nil {
		return 0, fmt.Errorf("%w: redis publish: %v", live.ErrUnavailable, err)
	}
	return int(n), nil
}

// Subscribe implements live.Relay. The first subscription of a channel
// returns once the server confirmed it, so a message published after
// Subscribe returns is delivered.
func (r *Relay) Subscribe(ctx context.Context, stream snowflake.ID, deliver func([]byte)) (func(), error) {
	ch := r.channel(stream)
	s := &sub{gate: live.NewGated(deliver)}
	r.mu.Lock()
	first := len(r.subs[ch]) == 0
	if first {
		r.subs[ch] = map[*sub]struct{}{}
	}
	r.subs[ch][s] = struct{}{}
	var confirmed chan struct{}
	if first {
		confirmed = make(chan struct{})
		r.waiting[ch] = append(r.waiting[ch], confirmed)
	}
	r.mu.Unlock()
	// The reader may hold a message for s when it is cancelled: the gate
	// keeps it from being delivered after cancel returned.
	cancel := func() { s.gate.Stop(); r.unsubscribe(ch, s) }
	if first {
		if err := r.ps.Subscribe(ctx, ch); err != nil {
			cancel()
			return nil, fmt.Errorf("%w: redis subscribe: %v", live.ErrUnavailable, err)
		}
		select {
		case <-confirmed:
		case <-ctx.Done():
			cancel()
			return nil, fmt.Errorf("%w: redis subscribe %s: %v", live.ErrUnavailable, ch, ctx.Err())
		case <-time.After(10 * time.Second):
			cancel()
			return nil, fmt.Errorf("%w: redis subscribe %s: not confirmed", live.ErrUnavailable, ch)
		}
	}
	var once sync.Once
	return func() { once.Do(cancel) }, nil
}

func (r *Relay) unsubscribe(ch string, s *sub) {
	r.mu.Lock()
	delete(r.subs[ch], s)
	last := len(r.subs[ch]) == 0
	if last {
		delete(r.subs, ch)
	}
	r.mu.Unlock()
	if last {
		if err := r.ps.Unsubscribe(r.ctx, ch); err != nil && r.ctx.Err() == nil {
			r.log.Warn("redis unsubscribe failed", "channel", ch, "err", err)
		}
	}
}

// read is the connection's one reader: it confirms subscriptions and
// delivers messages, in order.
func (r *Relay) read() {
	defer close(r.done)
	for {
		m, err := r.ps.Receive(r.ctx)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			// go-redis reconnects and resubscribes on the next Receive.
			r.log.Warn("redis pub/sub receive failed", "err", err)
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		switch m := m.(type) {
		case *goredis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			r.mu.Lock()
			ws := r.waiting[m.Channel]
			delete(r.waiting, m.Channel)
			r.mu.Unlock()
			for _, w := range ws {
				close(w)
			}
		case *goredis.Message:
			if !strings.HasPrefix(m.Channel, r.prefix) {
				continue
			}
			r.mu.Lock()
			subs := make([]*sub, 0, len(r.subs[m.Channel]))
			for s := range r.subs[m.Channel] {
				subs = append(subs, s)
			}
			r.mu.Unlock()
			payload := []byte(m.Payload)
			for _, s := range subs {
				s.gate.Deliver(payload)
			}
		}
	}
}
