package cluster

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/admission"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/counters"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/platform"
)

// IdentifyConfig is the identify throttle of gateway nodes
// (runtime/config): a node-wide token bucket in front of every IDENTIFY,
// and, with a shared counters backend (Redis = redis://...), the bots'
// per-bot max_concurrency buckets and daily budget counted across every
// gateway node sharing it.
type IdentifyConfig = config.Identify

// identifyAdmission is a gateway node's admission (runtime/admission, the
// same checks as `concord dev`) with the counters it opened.
type identifyAdmission struct {
	*admission.Admission
	// counters is nil without a shared counters backend, and bots false.
	counters counters.Counters
	bots     bool
}

// newIdentifyAdmission wraps a gateway node's backend with the admission
// of cfg.Identify and, when cfg.Redis names a Redis, the bots' shared
// identify counters; ac carries the rest (bot store, leases, read states).
func newIdentifyAdmission(ctx context.Context, cfg Config, next gateway.Backend, ac admission.Config, reg prometheus.Registerer, log *slog.Logger) (*identifyAdmission, error) {
	a := &identifyAdmission{}
	ac.Throttle = gateway.NewNodeThrottle(cfg.Identify.Rate, cfg.Identify.Burst, nil)
	ac.Registerer, ac.Logger = reg, log
	if r := cfg.Redis; r != "" && r != "mem" {
		var err error
		if a.counters, err = platform.OpenCounters(ctx, cfg); err != nil {
			return nil, fmt.Errorf("cluster: identify counters: %w", err)
		}
		ac.Bots = &gateway.BotAdmission{Counters: a.counters, Concurrency: cfg.Identify.Concurrency, Logger: log}
		a.bots = true
	}
	var err error
	if a.Admission, err = admission.New(next, ac); err != nil {
		_ = a.close()
		return nil, fmt.Errorf("cluster: identify admission: %w", err)
	}
	if ac.Throttle != nil || a.bots {
		log.Info("identify throttle", "rate", cfg.Identify.Rate, "burst", cfg.Identify.Burst, "bot_counters", a.bots)
	}
	return a, nil
}

// close releases the shared counters; nil-safe.
func (a *identifyAdmission) close() error {
	if a == nil || a.counters == nil {
		return nil
	}
	return a.counters.Close()
}
