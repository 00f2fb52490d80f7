package apirole

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// The bots' identify limits /gateway/bot reports.
const (
	// identifiesPerDay is session_start_limit.total.
	identifiesPerDay = gateway.BotIdentifiesPerDay
	// identifyDay is the daily window.
	identifyDay = gateway.BotIdentifyDay
	// guildsPerShardRecommended is the /gateway/bot shard recommendation.
	guildsPerShardRecommended = 1000
	// codeUnauthorized is the Discord code of a missing or bad token,
	// the same as every other endpoint's.
	codeUnauthorized = 40001
)

// GatewayBot serves GET /gateway/bot for the api role, in `concord dev`
// and on the api nodes of `concord serve`: the gateway URL, the recommended shard count
// ceil(guilds/1000) and session_start_limit from the identify counters
// the gateways count in. reset_after is the full day while the counter is
// fresh; the counters port does not expose a key's remaining time.
type GatewayBot struct {
	// Auth verifies the bot's token.
	Auth *auth.Issuer
	// Store lists the bot's guilds.
	Store store.Guilds
	// Counters are the gateways' identify counters; nil reports the full
	// daily budget.
	Counters counters.Counters
	// Concurrency is max_concurrency (config Identify.Concurrency).
	Concurrency int
	// PublicURL is the gateway URL; empty derives it from the request.
	PublicURL string
	// Logger receives store failures.
	Logger *slog.Logger
}

// ServeHTTP implements http.Handler.
func (g GatewayBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := g.Auth.Verify(ctx, auth.StripPrefix(r.Header.Get("Authorization")))
	if err != nil {
		if errors.Is(err, auth.ErrInvalidToken) {
			rest.WriteError(w, &rest.Error{Status: http.StatusUnauthorized, Code: codeUnauthorized, Message: "401: Unauthorized"})
			return
		}
		rest.WriteError(w, &rest.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable"})
		return
	}
	guilds, err := g.Store.UserGuilds(ctx, id)
	if err != nil {
		g.Logger.Error("gateway/bot: guilds", "user_id", id, "err", err)
		rest.WriteError(w, &rest.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable"})
		return
	}
	shards := max(1, (len(guilds)+guildsPerShardRecommended-1)/guildsPerShardRecommended)
	var used int64
	if g.Counters != nil {
		if used, err = g.Counters.Get(ctx, gateway.BotIdentifyDayKey(id)); err != nil {
			used = 0 // counters fail open
		}
	}
	rest.WriteJSON(w, http.StatusOK, map[string]any{
		"url":    GatewayURL(g.PublicURL, r),
		"shards": shards,
		"session_start_limit": map[string]any{
			"total": identifiesPerDay, "remaining": max(0, identifiesPerDay-int(used)),
			"reset_after": identifyDay.Milliseconds(), "max_concurrency": max(1, g.Concurrency),
		},
	})
}

// GatewayURL is the URL handed to clients: the configured public URL, or
// derived from the request's Host.
func GatewayURL(public string, r *http.Request) string {
	if public != "" {
		return public
	}
	return "ws://" + r.Host + "/gateway"
}
