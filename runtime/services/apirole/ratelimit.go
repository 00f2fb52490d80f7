package apirole

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

// OpenCounters opens the counters backend cfg.Redis names: "mem"
// (in-process, `concord dev`), "redis://host:port[/db][?prefix=P]" or a
// bare host:port. The REST limits and the bots' identify counters (which
// GET /gateway/bot reports) are kept in them.
func OpenCounters(ctx context.Context, cfg config.Config) (counters.Counters, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Redis == "mem" {
		c, err := mem.New(mem.Config{})
		if err != nil {
			return nil, fmt.Errorf("mem counters: %w", err)
		}
		return c, nil
	}
	raw := cfg.Redis
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw // host:port, as CONCORD_REDIS is often written
	}
	rc, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	cfg.ApplyRedisAuth(&rc)
	rc.Logger = log.With("component", "counters")
	c, err := redis.New(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("redis counters: %w", err)
	}
	return c, nil
}

// rateLimit wraps a REST handler with the REST rate limiter on counters c:
// every response carries X-RateLimit-* headers, and a request over its
// bucket gets a 429 with Via and Retry-After without reaching next.
// Requests are limited per token's user (isBot tells bots, whose global
// limit differs, from people) or, without a valid token, per client
// address. With --redis=redis://... every api node shares the route
// buckets, the global per-bot limit and the invalid-request bans; with
// mem each process counts alone (a client spread over N api nodes gets up
// to N times its limits).
func rateLimit(log *slog.Logger, c counters.Counters, reg prometheus.Registerer, iss *auth.Issuer, isBot func(context.Context, snowflake.ID) (bool, error), next http.Handler) (http.Handler, error) {
	lim, err := ratelimit.New(ratelimit.Config{Counters: c, Logger: log.With("component", "ratelimit"), Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("rate limiter: %w", err)
	}
	identify := func(r *http.Request) (ratelimit.Principal, bool) {
		token := ratelimit.BearerToken(r)
		if token == "" {
			return ratelimit.Principal{}, false
		}
		id, err := iss.Verify(r.Context(), auth.StripPrefix(token))
		if err != nil {
			return ratelimit.Principal{}, false
		}
		bot, err := isBot(r.Context(), id)
		if err != nil {
			return ratelimit.Principal{}, false
		}
		return ratelimit.Principal{ID: id.String(), Bot: bot}, true
	}
	return lim.Middleware(next, identify), nil
}
