package guildrole

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
)

// sweeper unloads the actors of the guilds the placement ring no longer
// gives this node.
type sweeper struct {
	svc      *guild.Service
	ring     *registry.LocalRing
	owns     func(snowflake.ID) bool
	unloaded prometheus.Counter
	log      *slog.Logger
}

func newSweeper(svc *guild.Service, ring *registry.LocalRing, owns func(snowflake.ID) bool, reg prometheus.Registerer, log *slog.Logger) (*sweeper, error) {
	s := &sweeper{svc: svc, ring: ring, owns: owns, log: log,
		unloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_cluster_guilds_unloaded_total",
			Help: "Guild actors a guild node stopped because the ring placed the guild on another node.",
		})}
	if reg != nil {
		if err := reg.Register(s.unloaded); err != nil {
			return nil, fmt.Errorf("guild role metrics: %w", err)
		}
	}
	return s, nil
}

// run unloads every loaded guild the ring no longer gives this node, at
// each ring change and every interval (guilds created or touched here for
// a moment, such as by POST /guilds, are placed elsewhere), until ctx
// ends.
func (g *sweeper) run(ctx context.Context, interval time.Duration) {
	changes := g.ring.Changes(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-t.C:
		case <-ctx.Done():
			return
		}
		for _, id := range g.svc.LoadedGuilds() {
			if g.owns(id) {
				continue
			}
			if err := g.svc.Unload(ctx, id); err != nil {
				if ctx.Err() == nil {
					g.log.Warn("unload guild placed elsewhere", "guild_id", id, "err", err)
				}
				continue
			}
			g.unloaded.Inc()
		}
	}
}
