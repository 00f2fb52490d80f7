package platform

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/presencerole"
	"github.com/concord-chat/concord/runtime/shed"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/typing"
)

// presenceWiring connects the gateway node, the presence role and the
// guild service in one process. Its gateway side (the SessionReporter
// and op 3, 8 and 14) is presencerole.Gateway, as on a gateway node of
// `concord serve`: it keeps each local session's state (client kind,
// last status and activities) so the node can re-report it, which is how
// a restarted presence role rebuilds.
type presenceWiring struct {
	cfg     PresenceConfig
	node    string
	log     *slog.Logger
	guilds  *guild.Service
	svc     atomic.Pointer[presence.Service]
	friends *presence.Friends
	// sessions keeps the local sessions' states for re-reports and orders
	// each change with its call to the presence role.
	sessions *presence.LocalSessions
	// gateway is the gateway's SessionReporter and op 3, 8 and 14
	// handlers, the same as a gateway node's in `concord serve`.
	gateway *presencerole.Gateway

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newPresenceWiring builds the presence role, the typing tracker and the
// shedder and enables them in the guild service.
func newPresenceWiring(cfg Config, guilds *guild.Service, reg prometheus.Registerer) (*presenceWiring, error) {
	w := &presenceWiring{
		cfg:     cfg.Presence,
		node:    cfg.Node,
		log:     cfg.Logger.With("component", "presence"),
		guilds:  guilds,
		friends: presence.NewFriends(nil),
	}
	w.sessions = presence.NewLocalSessions(presence.LocalSessionsConfig{Upstream: liveService{&w.svc}, Now: w.cfg.Now})
	w.gateway = &presencerole.Gateway{Sessions: w.sessions, Guilds: presencerole.LocalGuilds{Service: guilds},
		Ended: guilds.SessionEnded, Now: w.cfg.Now, Logger: w.log}
	svc, err := w.newService(0, reg)
	if err != nil {
		return nil, err
	}
	w.svc.Store(svc)
	tracker, err := typing.New(typing.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("platform: typing: %w", err)
	}
	shedder, err := shed.New(shed.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("platform: shed: %w", err)
	}
	guilds.EnablePresence(guild.PresenceConfig{Source: w, Tracker: tracker, Shedder: shedder})
	return w, nil
}

// newService returns a presence service that routes to the guild service.
func (w *presenceWiring) newService(warmup time.Duration, reg prometheus.Registerer) (*presence.Service, error) {
	svc, err := presence.New(presence.Config{
		Window: w.cfg.Window, Warmup: warmup, Now: w.cfg.Now,
		Registerer: reg, Logger: w.log,
	}, presence.RouterFunc(w.guilds.PresenceChanged), w.friends)
	if err != nil {
		return nil, fmt.Errorf("platform: presence: %w", err)
	}
	return svc, nil
}

// start runs the presence role's ticker and the node's re-reports until stop.
func (w *presenceWiring) start(node *gateway.Node) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		node.RunReports(ctx, w.cfg.ReportInterval)
	}()
	if w.cfg.TickInterval >= 0 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			interval := w.cfg.TickInterval
			if interval == 0 {
				interval = time.Second
			}
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					// Load each time: restart swaps the service.
					w.svc.Load().Tick(ctx)
				}
			}
		}()
	}
}

// stop ends the background loops.
func (w *presenceWiring) stop() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
	}
}

// Get implements guild.PresenceSource.
func (w *presenceWiring) Get(userID snowflake.ID) presence.Presence {
	return w.svc.Load().Get(userID)
}

// restart replaces the presence role with a fresh one, as after a crash
// of the presence node: it knows nothing until the gateway re-reports.
func (w *presenceWiring) restart(warmup time.Duration) (*presence.Service, error) {
	svc, err := w.newService(warmup, nil)
	if err != nil {
		return nil, err
	}
	w.svc.Store(svc)
	return svc, nil
}

// liveService is the presence role the wiring runs now: each call goes to
// the service restart last stored.
type liveService struct {
	p *atomic.Pointer[presence.Service]
}

func (l liveService) Connect(ctx context.Context, st presence.SessionState) error {
	return l.p.Load().Connect(ctx, st)
}

func (l liveService) Update(ctx context.Context, id event.SessionID, u presence.Update) error {
	return l.p.Load().Update(ctx, id, u)
}

func (l liveService) Disconnect(ctx context.Context, id event.SessionID) {
	l.p.Load().Disconnect(ctx, id)
}

func (l liveService) Report(ctx context.Context, node string, sessions []presence.SessionState) {
	l.p.Load().Report(ctx, node, sessions)
}
