package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/cluster"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/registry"
)

// bindIdentifyFlags registers the gateway role's identify throttle flags
// (ADR-07): a node-wide token bucket, and the bots' max_concurrency
// counted in the --redis counters every gateway node shares.
func bindIdentifyFlags(fs *pflag.FlagSet, cfg *cluster.Config) {
	rate := 0.0
	if v, ok := os.LookupEnv(envName("identify-rate")); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			rate = f
		}
	}
	fs.Float64Var(&cfg.Identify.Rate, "identify-rate", rate, fmt.Sprintf(
		"gateway nodes: identifies per second the node admits; more get op 9 and retry after 1-5 s; 0 = off (env %s)", envName("identify-rate")))
	intFlag := func(p *int, name string, def int, usage string) {
		if v, ok := os.LookupEnv(envName(name)); ok {
			if n, err := strconv.Atoi(v); err == nil {
				def = n
			}
		}
		fs.IntVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName(name)))
	}
	intFlag(&cfg.Identify.Burst, "identify-burst", 0, "gateway nodes: identifies admitted at once after a quiet spell; 0 = max(1, --identify-rate)")
	intFlag(&cfg.Platform.IdentifyConcurrency, "identify-concurrency", 1,
		"gateway nodes with --redis: bots' max_concurrency (identifies per 5 s per shard_id % max_concurrency; 1,000 per 24 h per bot)")
}

// checkServeRedis accepts --redis=redis://... only on nodes running the
// roles of `concord serve` that use the counters: gateway (bots' identify
// admission shared across gateway nodes) and api (REST rate limits shared
// across api nodes).
func checkServeRedis(cfg cluster.Config) error {
	if cfg.Platform.Redis == "mem" || cfg.Platform.Redis == "" ||
		slices.Contains(cfg.Roles, registry.RoleGateway) || slices.Contains(cfg.Roles, registry.RoleAPI) {
		return nil
	}
	return fmt.Errorf("--redis=%s is used only by the gateway role (bots' identify counters) and the api role (REST rate limits) in concord serve; this node runs %v", platform.RedactURL(cfg.Platform.Redis), cfg.Roles)
}
