package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/rest"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// Identify limits of bots (issue 7, seed 002).
const (
	// identifyWindow is the window of max_concurrency identifies per
	// bucket (shard_id % max_concurrency).
	identifyWindow = gateway.BotIdentifyWindow
	// identifiesPerDay is session_start_limit.total.
	identifiesPerDay = gateway.BotIdentifiesPerDay
	// identifyDay is the daily window.
	identifyDay = gateway.BotIdentifyDay
	// guildsPerShardRecommended is the /gateway/bot shard recommendation.
	guildsPerShardRecommended = 1000
	// maxGuildsPerShard is the most guilds one session may hold (4011).
	maxGuildsPerShard = 2500
)

// errIdentifyLimited is an identify over the bot's admission limits:
// gateway.ErrIdentifyRateLimited, which the gateway answers with op 9
// d:false.
var errIdentifyLimited = gateway.ErrIdentifyRateLimited

// admission is the gateway Backend with the bot platform's IDENTIFY
// checks in front: privileged intents the application did not enable
// (4014), too many guilds on one shard (4011), and identify admission
// counted in the counters backend (max_concurrency per 5 s by shard_id %
// max_concurrency, 1,000 per 24 h per bot). Resumes never reach Identify,
// so they do not count. Users (not bots) are not limited here.
type admission struct {
	gateway.Backend
	intents     func(ctx context.Context, botUserID snowflake.ID) (uint64, error)
	apps        botApplications
	counters    counters.Counters
	concurrency int
	now         func() time.Time
	log         *slog.Logger
	// leases holds bots' entitlement leases (ADR-08); nil: none.
	leases *entitlement.Manager
}

// Identify implements gateway.Backend.
func (a admission) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	r, err := a.Backend.Identify(ctx, token, s)
	if err != nil || !r.Bot {
		return r, err
	}
	allowed, err := a.intents(ctx, r.UserID)
	if err != nil {
		return event.Ready{}, fmt.Errorf("identify: allowed intents of %d: %w", r.UserID, err)
	}
	if extra := s.Intents & bots.PrivilegedIntents &^ allowed; extra != 0 {
		return event.Ready{}, fmt.Errorf("identify: privileged intents %d not enabled: %w", extra, gateway.ErrDisallowedIntents)
	}
	if len(r.Guilds) > maxGuildsPerShard {
		return event.Ready{}, fmt.Errorf("identify: %d guilds on one shard: %w", len(r.Guilds), gateway.ErrShardingRequired)
	}
	if a.leases != nil {
		// While entitlements cannot be read or revocations cannot be
		// received, a new bot session is refused with op 9 d:false:
		// bot libraries wait 1-5 s and identify again, where a close
		// code such as 4004 would stop them for good.
		if err := a.leases.Admit(ctx, r.UserID); err != nil {
			return event.Ready{}, fmt.Errorf("identify: %w: %w", err, errIdentifyLimited)
		}
	}
	if err := a.admit(ctx, r.UserID, s.ShardID); err != nil {
		return event.Ready{}, err
	}
	// READY's application is the bot's application, whose id differs
	// from the bot user's: libraries register commands under it.
	app, err := a.apps.ApplicationByBot(ctx, r.UserID)
	switch {
	case err == nil:
		r.ApplicationID, r.ApplicationFlags = app.ID, app.Flags
	case !errors.Is(err, bots.ErrNotFound):
		return event.Ready{}, fmt.Errorf("identify: application of %d: %w", r.UserID, err)
	}
	return r, nil
}

// Subscribe implements gateway.Backend: a bot session joins its bot's
// entitlement lease before it is attached to its guilds, so that a
// revocation arriving meanwhile reaches it.
func (a admission) Subscribe(ctx context.Context, s event.Session) error {
	if a.leases != nil && s.Bot {
		a.leases.Attach(s)
	}
	return a.Backend.Subscribe(ctx, s)
}

// Disconnect implements gateway.Backend.
func (a admission) Disconnect(ctx context.Context, s event.Session) {
	a.Backend.Disconnect(ctx, s)
	if a.leases != nil && s.Bot {
		a.leases.Detach(s)
	}
}

// botApplications finds a bot user's application; the bot store
// implements it.
type botApplications interface {
	ApplicationByBot(ctx context.Context, botUserID snowflake.ID) (bots.Application, error)
}

// admit takes one identify from the bot's concurrency bucket and daily
// count (gateway.BotAdmission, shared with `concord serve` gateway nodes).
// A counters outage admits (rate limiting fails open, ADR-09).
func (a admission) admit(ctx context.Context, botID snowflake.ID, shard int) error {
	return gateway.BotAdmission{Counters: a.counters, Concurrency: a.concurrency, Now: a.now, Logger: a.log}.Admit(ctx, botID, shard)
}

// gatewayBot serves GET /gateway/bot: the gateway URL, the recommended
// shard count ceil(guilds/1000) and session_start_limit from the identify
// counters. reset_after is the full day while the counter is fresh; the
// counters port does not expose a key's remaining time.
type gatewayBot struct {
	auth        *auth.Issuer
	store       store.Store
	counters    counters.Counters
	concurrency int
	url         func(r *http.Request) string
	log         *slog.Logger
}

// ServeHTTP implements http.Handler.
func (g gatewayBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := g.auth.Verify(ctx, auth.StripPrefix(r.Header.Get("Authorization")))
	if err != nil {
		if errors.Is(err, auth.ErrInvalidToken) {
			rest.WriteError(w, &rest.Error{Status: http.StatusUnauthorized, Message: "401: Unauthorized"})
			return
		}
		rest.WriteError(w, &rest.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable"})
		return
	}
	guilds, err := g.store.UserGuilds(ctx, id)
	if err != nil {
		g.log.Error("gateway/bot: guilds", "user_id", id, "err", err)
		rest.WriteError(w, &rest.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable"})
		return
	}
	shards := max(1, (len(guilds)+guildsPerShardRecommended-1)/guildsPerShardRecommended)
	used, err := g.counters.Get(ctx, gateway.BotIdentifyDayKey(id))
	if err != nil {
		used = 0 // counters fail open
	}
	rest.WriteJSON(w, http.StatusOK, map[string]any{
		"url":    g.url(r),
		"shards": shards,
		"session_start_limit": map[string]any{
			"total": identifiesPerDay, "remaining": max(0, identifiesPerDay-int(used)),
			"reset_after": identifyDay.Milliseconds(), "max_concurrency": g.concurrency,
		},
	})
}

// OpenCounters opens the counters backend cfg.Redis names ("mem",
// "redis://host:port[/db][?prefix=P]" or host:port), as `concord dev`
// does; `concord serve` gateway nodes share bots' identify counters
// through it.
func OpenCounters(ctx context.Context, cfg Config) (counters.Counters, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return openCounters(ctx, cfg)
}
