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
	rc.Logger = cfg.Logger.With("component", "counters")
	c, err := redis.New(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("platform: redis counters: %w", err)
	}
	return c, nil
}

// rateLimited wraps the REST handler with the ADR-09 limiter: every
// response carries X-RateLimit-* headers, and a request over its bucket
// gets a 429 with Via and Retry-After without reaching next. Requests are
// limited per token's user (bots and users have separate global limits)
// or, without a valid token, per client address.
func rateLimited(cfg Config, c counters.Counters, reg prometheus.Registerer, iss *auth.Issuer, flags *botFlags, next http.Handler) (http.Handler, error) {
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
		bot, err := flags.isBot(r.Context(), id)
		if err != nil {
			return ratelimit.Principal{}, false
		}
		return ratelimit.Principal{ID: id.String(), Bot: bot}, true
	}
	return lim.Middleware(next, identify), nil
}
