package cluster

import (
	"context"
	"fmt"
	"net/http"

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
	c, err := platform.OpenCounters(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: rate limit counters: %w", err)
	}
	flags := platform.NewBotFlags(func(ctx context.Context, id snowflake.ID) (bool, error) {
		u, err := users.GetUser(ctx, id)
		return u.Bot, err
	})
	wrap := func(next http.Handler) (http.Handler, error) {
		return platform.RateLimit(cfg, c, reg, iss, flags.IsBot, next)
	}
	return wrap, c, nil
}
