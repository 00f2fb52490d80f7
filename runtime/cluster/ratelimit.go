package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// openRateLimit builds the api role's REST limiter (ADR-09) on the
// counters of --redis: with redis://..., every api node shares the route
// buckets, the global per-bot limit and the invalid-request bans; with
// mem, each node counts alone (a client spread over N api nodes gets up
// to N times its limits). It returns the handler wrapper and the counters
// to close.
func openRateLimit(ctx context.Context, cfg Config, users store.Store, iss *auth.Issuer, reg prometheus.Registerer) (func(http.Handler) (http.Handler, error), counters.Counters, error) {
	c, err := platform.OpenCounters(ctx, cfg.Platform)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: rate limit counters: %w", err)
	}
	flags := &botCache{users: users, bot: make(map[snowflake.ID]bool)}
	wrap := func(next http.Handler) (http.Handler, error) {
		return platform.RateLimit(cfg.Platform, c, reg, iss, flags.isBot, next)
	}
	return wrap, c, nil
}

// botCache remembers which users are bots (a user never changes kind).
type botCache struct {
	users store.Store
	mu    sync.Mutex
	bot   map[snowflake.ID]bool
}

func (b *botCache) isBot(ctx context.Context, id snowflake.ID) (bool, error) {
	b.mu.Lock()
	v, ok := b.bot[id]
	b.mu.Unlock()
	if ok {
		return v, nil
	}
	u, err := b.users.GetUser(ctx, id)
	if err != nil {
		return false, fmt.Errorf("bot flag of %d: %w", id, err)
	}
	b.mu.Lock()
	if len(b.bot) > 1<<16 {
		clear(b.bot)
	}
	b.bot[id] = u.Bot
	b.mu.Unlock()
	return u.Bot, nil
}
