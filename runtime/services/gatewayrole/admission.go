package gatewayrole

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/edge/admission"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// newAdmission puts the identify admission of both modes in front of
// next: the node-wide token bucket of cfg.Identify in front of every
// IDENTIFY and, with counters c (nil: none), the bots' max_concurrency
// buckets and daily budget counted on c, shared by every gateway
// counting against the same backend. ac carries the rest (bot store,
// leases, read states).
func newAdmission(cfg config.Config, next gateway.Backend, c counters.Counters, ac admission.Config, reg prometheus.Registerer, log *slog.Logger) (*admission.Admission, error) {
	ac.Throttle = gateway.NewNodeThrottle(cfg.Identify.Rate, cfg.Identify.Burst, nil)
	ac.Registerer, ac.Logger = reg, log
	if c != nil {
		ac.Bots = &gateway.BotAdmission{Counters: c, Concurrency: cfg.Identify.Concurrency, Logger: log}
	}
	a, err := admission.New(next, ac)
	if err != nil {
		return nil, fmt.Errorf("identify admission: %w", err)
	}
	log.Debug("identify admission", "rate", cfg.Identify.Rate, "burst", cfg.Identify.Burst, "bot_counters", c != nil)
	return a, nil
}
