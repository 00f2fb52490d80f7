package presencerole

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/shed"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/domain/typing"
)

// Local is the presence service of `concord dev`: one presence.Service
// in the process, broadcasting through the process's guild service, the
// guild service's presence source and the gateway's upstream. Restart
// replaces the service with a fresh one, as after a crash of a presence
// node; the gateway side keeps each local session's state and re-reports
// it, which is how the fresh service rebuilds.
type Local struct {
	cfg     config.Presence
	log     *slog.Logger
	guilds  *guild.Service
	friends *presence.Friends
	svc     atomic.Pointer[presence.Service]
	// gateway is the process's gateway side over this service.
	gateway *Gateway
}

var (
	_ guild.PresenceSource = (*Local)(nil)
	_ presence.Upstream    = (*Local)(nil)
)

// newLocal builds the service, its gateway side, the typing tracker and
// the shedder, and enables them in the guild service.
func newLocal(cfg config.Config, guilds *guild.Service, reg prometheus.Registerer, log *slog.Logger) (*Local, error) {
	l := &Local{cfg: cfg.Presence, log: log, guilds: guilds, friends: presence.NewFriends(nil)}
	svc, err := l.newService(0, reg)
	if err != nil {
		return nil, err
	}
	l.svc.Store(svc)
	sessions := presence.NewLocalSessions(presence.LocalSessionsConfig{Upstream: l, Now: cfg.Presence.Now})
	l.gateway = &Gateway{Sessions: sessions, Guilds: LocalGuilds{Service: guilds},
		Ended: guilds.SessionEnded, Now: cfg.Presence.Now, Logger: log}
	tracker, err := typing.New(typing.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("typing: %w", err)
	}
	shedder, err := shed.New(shed.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("shed: %w", err)
	}
	guilds.EnablePresence(guild.PresenceConfig{Source: l, Tracker: tracker, Shedder: shedder})
	return l, nil
}

// newService returns a presence service that routes changes to the
// guild service.
func (l *Local) newService(warmup time.Duration, reg prometheus.Registerer) (*presence.Service, error) {
	svc, err := presence.New(presence.Config{
		Window: l.cfg.Window, Warmup: warmup, Now: l.cfg.Now,
		Registerer: reg, Logger: l.log,
	}, presence.RouterFunc(l.guilds.PresenceChanged), l.friends)
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	return svc, nil
}

// Service returns the presence service the process runs now.
func (l *Local) Service() *presence.Service { return l.svc.Load() }

// Restart replaces the presence service with a fresh one that absorbs
// re-reports silently for warmup, as after a crash of a presence node:
// it knows nothing until the gateway re-reports. Its metrics go
// unregistered (the first service's hold the names).
func (l *Local) Restart(warmup time.Duration) (*presence.Service, error) {
	svc, err := l.newService(warmup, nil)
	if err != nil {
		return nil, err
	}
	l.svc.Store(svc)
	return svc, nil
}

// Get implements guild.PresenceSource.
func (l *Local) Get(userID snowflake.ID) presence.Presence { return l.Service().Get(userID) }

// Connect implements presence.Upstream on the current service.
func (l *Local) Connect(ctx context.Context, st presence.SessionState) error {
	return l.Service().Connect(ctx, st)
}

// Update implements presence.Upstream on the current service.
func (l *Local) Update(ctx context.Context, id event.SessionID, u presence.Update) error {
	return l.Service().Update(ctx, id, u)
}

// Disconnect implements presence.Upstream on the current service.
func (l *Local) Disconnect(ctx context.Context, id event.SessionID) {
	l.Service().Disconnect(ctx, id)
}

// Report implements presence.Upstream on the current service.
func (l *Local) Report(ctx context.Context, node string, sessions []presence.SessionState) {
	l.Service().Report(ctx, node, sessions)
}

// tickInterval is how often the service broadcasts due changes: the
// configured TickInterval, else a quarter of the coalescing window, at
// most a second; zero when the configuration runs no ticker (a negative
// TickInterval: tests tick themselves).
func tickInterval(cfg config.Presence) time.Duration {
	switch {
	case cfg.TickInterval < 0:
		return 0
	case cfg.TickInterval > 0:
		return cfg.TickInterval
	}
	if t := cfg.Window / 4; t > 0 && t < time.Second {
		return t
	}
	return time.Second
}
