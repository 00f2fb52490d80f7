package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/memberlist"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/shed"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/typing"
)

// presenceWiring connects the gateway node, the presence role and the
// guild service in one process. It is the gateway's SessionReporter: it
// keeps each local session's state (client kind, last status and
// activities) so the node can re-report it, which is how a restarted
// presence role rebuilds. It also serves op 3, 8 and 14.
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

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ gateway.SessionReporter = (*presenceWiring)(nil)

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

// SessionStarted implements gateway.SessionReporter: the session counts
// with IDENTIFY's presence (an invalid one is ignored: online).
func (w *presenceWiring) SessionStarted(ctx context.Context, s event.Session, c gateway.ClientInfo) {
	st := presence.SessionState{
		Session: s.ID, UserID: s.UserID, Node: s.Node,
		Client: presence.ClientKind(c.OS, c.Browser), Status: presence.Online,
		UpdatedAt: w.now(),
	}
	if c.Presence != nil {
		if u, err := presence.ParseUpdate(c.Presence); err == nil {
			st.Status, st.AFK, st.Activities = u.Status, u.AFK, u.Activities
		} else {
			w.log.Debug("identify presence ignored", "session_id", s.ID, "err", err)
		}
	}
	if err := w.sessions.Start(ctx, st); err != nil {
		w.log.Debug("presence connect", "session_id", s.ID, "err", err)
	}
}

// SessionEnded implements gateway.SessionReporter.
func (w *presenceWiring) SessionEnded(ctx context.Context, s event.Session) {
	w.sessions.End(ctx, s.ID)
	w.guilds.SessionEnded(s.ID)
}

// Report implements gateway.SessionReporter: the states of the node's
// sessions go to the presence role; states of sessions the node no
// longer holds are forgotten.
func (w *presenceWiring) Report(ctx context.Context, node string, sessions []event.Session) {
	w.sessions.Report(ctx, node, sessions)
}

func (w *presenceWiring) now() time.Time {
	if w.cfg.Now != nil {
		return w.cfg.Now()
	}
	return time.Now()
}

// opHandlers returns the gateway's op 3, 8 and 14 handlers.
func (w *presenceWiring) opHandlers() map[int]gateway.OpHandler {
	return map[int]gateway.OpHandler{
		gateway.OpPresenceUpdate:      gateway.OpHandlerFunc(w.presenceUpdate),
		gateway.OpRequestGuildMembers: gateway.OpHandlerFunc(w.requestMembers),
		gateway.OpLazyRequest:         gateway.OpHandlerFunc(w.lazyRequest),
	}
}

// presenceUpdate handles op 3: invalid updates close with 4002, floods
// with 4008.
func (w *presenceWiring) presenceUpdate(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	u, err := presence.ParseUpdate(d)
	if err == nil {
		err = w.sessions.Apply(ctx, s.ID, u)
	}
	if c := presence.CloseCode(err); c != 0 {
		return &gateway.CloseError{Code: c, Reason: "presence"}
	}
	return err
}

// lazyRequest handles op 14. A payload that does not decode closes with
// 4002; refused channels or clamped ranges are only logged.
func (w *presenceWiring) lazyRequest(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	req, err := memberlist.ParseRequest(d)
	if err != nil {
		return &gateway.CloseError{Code: gateway.CloseDecodeError, Reason: "bad op 14"}
	}
	if err := w.guilds.LazyRequest(ctx, s, req); err != nil {
		return fmt.Errorf("platform: op 14: %w", err)
	}
	return nil
}

// requestMembers handles op 8. A payload that does not decode closes with
// 4002; a request missing its intent is logged and ignored.
func (w *presenceWiring) requestMembers(ctx context.Context, s event.Session, _ int, d json.RawMessage) error {
	req, err := memberlist.ParseMembersRequest(d)
	if err != nil {
		return &gateway.CloseError{Code: gateway.CloseDecodeError, Reason: "bad op 8"}
	}
	if err := w.guilds.RequestMembers(ctx, s, req); err != nil {
		return fmt.Errorf("platform: op 8: %w", err)
	}
	return nil
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
