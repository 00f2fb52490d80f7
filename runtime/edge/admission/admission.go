// Package admission decides whether an IDENTIFY becomes a session, the
// same way in `concord dev` and on every gateway node of `concord serve`.
//
// In order, before the backend's lookups: the process-wide identify
// throttle (op 9 d:false, no store read). After them, for bots only:
// privileged intents the application did not enable (close 4014), too
// many guilds on one shard (4011), the bot's entitlement lease (op 9
// while revocations cannot be received), and the bot's max_concurrency
// bucket and daily budget in the counters backend (op 9). READY then
// carries the bot's application id and flags and, for every user, the
// read states the read-state role keeps. RESUME never reaches Identify,
// so it is never counted or throttled.
package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// MaxGuildsPerShard is the most guilds one session may hold; an identify
// with more is closed 4011 (sharding required).
const MaxGuildsPerShard = 2500

// Applications finds a bot user's application; the bot store implements
// it.
type Applications interface {
	ApplicationByBot(ctx context.Context, botUserID snowflake.ID) (bots.Application, error)
}

// ReadStates lists a user's read states for READY; the read-state
// service and its gRPC client implement it.
type ReadStates interface {
	States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error)
}

// Config chooses the checks. Nil fields turn their check off.
type Config struct {
	// Throttle is the process-wide identify bucket.
	Throttle *gateway.NodeThrottle
	// Bots counts the bots' identifies (max_concurrency, daily budget).
	Bots *gateway.BotAdmission
	// Apps is the bot store: the application whose flags allow
	// privileged intents and whose id READY carries. Nil skips the
	// intent and application checks.
	Apps Applications
	// Leases holds bots' entitlement leases.
	Leases *entitlement.Manager
	// States adds read_state to READY.
	States ReadStates
	// Registerer receives the concord_cluster_identify_* series.
	Registerer prometheus.Registerer
	// Logger receives the admission's logs.
	Logger *slog.Logger
}

// Admission is a gateway.Backend with the admission checks in front of
// another.
type Admission struct {
	gateway.Backend
	cfg Config
	log *slog.Logger
	m   *metrics
}

var _ gateway.Backend = (*Admission)(nil)

// New wraps next with the checks cfg turns on.
func New(next gateway.Backend, cfg Config) (*Admission, error) {
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Admission{Backend: next, cfg: cfg, log: cfg.Logger, m: m}, nil
}

// Identify implements gateway.Backend.
func (a *Admission) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	if ok, retry := a.cfg.Throttle.Allow(); !ok {
		a.m.refused.WithLabelValues("node_rate").Inc()
		return event.Ready{}, fmt.Errorf("identify: process identify rate reached, next in %s: %w", retry, gateway.ErrIdentifyRateLimited)
	}
	a.m.backlog.Inc()
	defer a.m.backlog.Dec()
	start := time.Now()
	r, err := a.Backend.Identify(ctx, token, s)
	if err == nil && a.cfg.States != nil {
		r.ReadState = a.readState(ctx, r.UserID)
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	a.m.lookup.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	if err != nil || !r.Bot {
		return r, err
	}
	if err := a.admitBot(ctx, &r, s); err != nil {
		return event.Ready{}, err
	}
	return r, nil
}

// readState is READY's read_state. A read-state failure leaves it empty
// rather than failing the identify: badges catch up on the next ack.
func (a *Admission) readState(ctx context.Context, user snowflake.ID) json.RawMessage {
	entries, err := a.cfg.States.States(ctx, user, nil)
	if err != nil {
		a.log.Warn("READY without read states", "user_id", user, "err", err)
	}
	if err != nil || entries == nil {
		entries = []readstate.State{}
	}
	out, _ := json.Marshal(map[string]any{"entries": entries, "partial": false, "version": 1})
	return out
}

// admitBot runs the bot checks and fills READY's application.
func (a *Admission) admitBot(ctx context.Context, r *event.Ready, s event.Session) error {
	var app bots.Application
	haveApp := false
	if a.cfg.Apps != nil {
		var err error
		app, err = a.cfg.Apps.ApplicationByBot(ctx, r.UserID)
		switch {
		case err == nil:
			haveApp = true
		case !errors.Is(err, bots.ErrNotFound):
			return fmt.Errorf("identify: application of %d: %w", r.UserID, err)
		}
		var allowed uint64 = bots.PrivilegedIntents // a bot user without an application is not governed
		if haveApp {
			allowed = bots.AllowedIntents(app.Flags)
		}
		if extra := s.Intents & bots.PrivilegedIntents &^ allowed; extra != 0 {
			return fmt.Errorf("identify: privileged intents %d not enabled: %w", extra, gateway.ErrDisallowedIntents)
		}
	}
	if len(r.Guilds) > MaxGuildsPerShard {
		return fmt.Errorf("identify: %d guilds on one shard: %w", len(r.Guilds), gateway.ErrShardingRequired)
	}
	if a.cfg.Leases != nil {
		// While entitlements cannot be read or revocations cannot be
		// received, a new bot session is refused with op 9 d:false: bot
		// libraries wait 1-5 s and identify again, where a close code
		// such as 4004 would stop them for good.
		if err := a.cfg.Leases.Admit(ctx, r.UserID); err != nil {
			a.m.refused.WithLabelValues("entitlement").Inc()
			return fmt.Errorf("identify: %w: %w", err, gateway.ErrIdentifyRateLimited)
		}
	}
	if a.cfg.Bots != nil {
		if err := a.cfg.Bots.Admit(ctx, r.UserID, s.ShardID); err != nil {
			if errors.Is(err, gateway.ErrIdentifyRateLimited) {
				a.m.refused.WithLabelValues("bot_limit").Inc()
			}
			return err
		}
	}
	// READY's application is the bot's application, whose id differs
	// from the bot user's: libraries register commands under it.
	if haveApp {
		r.ApplicationID, r.ApplicationFlags = app.ID, app.Flags
	}
	return nil
}

// Subscribe implements gateway.Backend: a bot session joins its bot's
// entitlement lease before it is attached to its guilds, so that a
// revocation arriving meanwhile reaches it.
func (a *Admission) Subscribe(ctx context.Context, s event.Session) error {
	if a.cfg.Leases != nil && s.Bot {
		a.cfg.Leases.Attach(s)
	}
	start := time.Now()
	err := a.Backend.Subscribe(ctx, s)
	a.m.subscribe.Observe(time.Since(start).Seconds())
	return err
}

// Disconnect implements gateway.Backend.
func (a *Admission) Disconnect(ctx context.Context, s event.Session) {
	a.Backend.Disconnect(ctx, s)
	if a.cfg.Leases != nil && s.Bot {
		a.cfg.Leases.Detach(s)
	}
}
