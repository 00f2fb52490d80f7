package platform

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/counters/mem"
	"github.com/concord-chat/concord/runtime/counters/redis"
	"github.com/concord-chat/concord/runtime/ratelimit"
	"github.com/concord-chat/concord/runtime/snowflake"
)

// openCounters opens the counters backend of --redis: "mem" (in-process,
// `concord dev`), "redis://host:port[/db][?prefix=P]" or a bare host:port.
func openCounters(ctx context.Context, cfg Config) (counters.Counters, error) {
	if cfg.Redis == "mem" {
		c, err := mem.New(mem.Config{})
		if err != nil {
			return nil, fmt.Errorf("platform: mem counters: %w", err)
		}
		return c, nil
	}
	raw := cfg.Redis
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw // host:port, as CONCORD_REDIS is often written
	}
	rc, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("platform: --redis: %w", err)
	}
	cfg.ApplyRedisAuth(&rc)
	rc.Logger = cfg.Logger.With("component", "counters")
	c, err := redis.New(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("platform: redis counters: %w", err)
	}
	return c, nil
}

// rateLimited wraps the REST handler with the ADR-09 limiter (RateLimit),
// bots told apart through the guild service's user records.
func rateLimited(cfg Config, c counters.Counters, reg prometheus.Registerer, iss *auth.Issuer, flags *BotFlags, next http.Handler) (http.Handler, error) {
	return RateLimit(cfg, c, reg, iss, flags.IsBot, next)
}

// RateLimit wraps a REST handler with the ADR-09 limiter on counters c:
// every response carries X-RateLimit-* headers, and a request over its
// bucket gets a 429 with Via and Retry-After without reaching next.
// Requests are limited per token's user (isBot tells bots, whose global
// limit differs, from people) or, without a valid token, per client
// address. `concord dev` and the api role of `concord serve` use it.
func RateLimit(cfg Config, c counters.Counters, reg prometheus.Registerer, iss *auth.Issuer, isBot func(context.Context, snowflake.ID) (bool, error), next http.Handler) (http.Handler, error) {
	lim, err := ratelimit.New(ratelimit.Config{Counters: c, Logger: cfg.Logger.With("component", "ratelimit"), Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("platform: rate limiter: %w", err)
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
