package main

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/liverole"
)

// bindIdentifyFlags registers the gateway role's identify throttle flags
// (a reconnect storm's identifies kept within what the store answers
// quickly): a node-wide token bucket; the bots' max_concurrency
// (--identify-concurrency) is a shared flag.
func bindIdentifyFlags(fs *pflag.FlagSet, cfg *config.Config) {
	floatFlag(fs, &cfg.Identify.Rate, "identify-rate", 0, "gateway nodes: identifies per second the node admits; more get op 9 and retry after 1-5 s; 0 = off")
	intFlag(fs, &cfg.Identify.Burst, "identify-burst", 0, "gateway nodes: identifies admitted at once after a quiet spell; 0 = max(1, --identify-rate)")
}

// checkServeRedis accepts --redis=redis://... only on nodes running the
// roles of `concord serve` that use the counters: gateway (bots' identify
// admission shared across gateway nodes) and api (REST rate limits shared
// across api nodes), and the live-comment roles but the archiver (recent
// cache, relay, comment rate limits).
func checkServeRedis(cfg config.Config) error {
	if cfg.Redis == "mem" || cfg.Redis == "" ||
		slices.Contains(cfg.Roles, registry.RoleGateway) || slices.Contains(cfg.Roles, registry.RoleAPI) ||
		slices.ContainsFunc(cfg.Roles, liverole.UsesRedis) {
		return nil
	}
	return fmt.Errorf("--redis=%s is used only by the gateway role (bots' identify counters), the api role (REST rate limits) and the live-api, live-gateway and live-router roles in concord serve; this node runs %v", config.RedactURL(cfg.Redis), cfg.Roles)
}
