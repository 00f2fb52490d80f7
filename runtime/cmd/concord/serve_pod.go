package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
)

// podFlags are the serve flags the operator sets through the environment
// of the pods it creates, plus the snowflake pair choice.
type podFlags struct {
	snowflakeID string
	dedicated   string
}

// bindPodFlags registers the operator-facing flags of serve.
func bindPodFlags(fs *pflag.FlagSet, cfg *config.Config, pf *podFlags) {
	strFlag(fs, &pf.snowflakeID, "snowflake-id", "", "snowflake worker/process pair: auto claims a free pair in the registry while the node lives; W/P sets it; "+
		"empty means --worker/--process when either is given, else auto")
	strFlag(fs, &cfg.Pod.Cluster, "cluster", "", "name of the ConcordCluster this node belongs to (registry label concord.dev/cluster, label of concord_cluster_node_info)")
	strFlag(fs, &cfg.Pod.GatewayPool, "gateway-pool", "", "gateway nodes: the GatewayPool the node belongs to (registry label)")
	strFlag(fs, &cfg.Pod.ClientClass, "gateway-client-class", "", "gateway nodes: the pool's client class, e.g. bots or users (registry label)")
	intFlag(fs, &cfg.Pod.SessionsTarget, "gateway-sessions-target", 0,
		"gateway nodes: sessions the pool sizes this node for, exported as concord_gateway_sessions_target next to concord_gateway_sessions; 0 = unset")
	strFlag(fs, &pf.dedicated, "guild-dedicated", "", "guild nodes: the guild id this node is dedicated to (GuildPlacement): it takes no share of the ring "+
		"and runs only the guilds pinned to it")
}

// applyPodFlags parses what bindPodFlags bound into cfg.
func applyPodFlags(fs *pflag.FlagSet, cfg *config.Config, pf podFlags) error {
	switch id := strings.TrimSpace(pf.snowflakeID); {
	case id == "auto":
		cfg.SnowflakeAuto = true
	case id == "":
		_, envW := os.LookupEnv(envName("worker"))
		_, envP := os.LookupEnv(envName("process"))
		cfg.SnowflakeAuto = !fs.Changed("worker") && !fs.Changed("process") && !envW && !envP
	default:
		w, p, ok := strings.Cut(id, "/")
		wn, werr := strconv.Atoi(w)
		pn, perr := strconv.Atoi(p)
		if !ok || werr != nil || perr != nil {
			return fmt.Errorf("--snowflake-id=%q: want auto or WORKER/PROCESS, e.g. 3/17", pf.snowflakeID)
		}
		cfg.Worker, cfg.Process = wn, pn
	}
	if pf.dedicated != "" {
		id, err := strconv.ParseUint(pf.dedicated, 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("--guild-dedicated=%q: want a guild id (a snowflake)", pf.dedicated)
		}
		cfg.Pod.DedicatedGuild = snowflake.ID(id)
	}
	return nil
}
