package cluster

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// rateLimited wraps the api role's handler with the REST limiter
// (ADR-09) on counters c, opened from --redis: with redis://..., every api
// node shares the route buckets, the global per-bot limit and the
// invalid-request bans; with mem, each node counts alone (a client spread
// over N api nodes gets up to N times its limits).
func rateLimited(cfg Config, c counters.Counters, users store.Store, iss *auth.Issuer, reg prometheus.Registerer, next http.Handler) (http.Handler, error) {
	flags := platform.NewBotFlags(func(ctx context.Context, id snowflake.ID) (bool, error) {
		u, err := users.GetUser(ctx, id)
		return u.Bot, err
	})
	return platform.RateLimit(cfg, c, reg, iss, flags.IsBot, next)
}
