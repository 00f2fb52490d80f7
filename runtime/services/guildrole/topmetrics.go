package guildrole

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/domain/guild"
)

// registerTopGuilds registers the labelled series of the top busiest
// guilds of svc (guild.TopGuilds) with reg: --guild-metrics-top of them,
// none when it is negative. Every process running the role has them,
// `concord dev` included, like the admin statistics they mirror.
func registerTopGuilds(reg prometheus.Registerer, svc *guild.Service, top int) error {
	if reg == nil || top < 0 {
		return nil
	}
	if err := reg.Register(guild.NewTopGuilds(svc, guild.TopGuildsConfig{K: top})); err != nil {
		return fmt.Errorf("guild top metrics: %w", err)
	}
	return nil
}
