package presence

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// Upstream is where a gateway node sends its sessions' presence: the
// Service itself when both run in one process, or a client of the
// presence node (transport.PresenceClient) in a cluster.
type Upstream interface {
	// Connect counts a session that identified (Service.Connect).
	Connect(ctx context.Context, st SessionState) error
	// Update applies a session's op 3 (Service.Update).
	Update(ctx context.Context, id event.SessionID, u Update) error
	// Disconnect forgets a session (Service.Disconnect).
	Disconnect(ctx context.Context, id event.SessionID)
	// Report replaces what upstream knows of a node's sessions
	// (Service.Report).
	Report(ctx context.Context, node string, sessions []SessionState)
}

var _ Upstream = (*Service)(nil)

// LocalSessionsConfig configures LocalSessions.
type LocalSessionsConfig struct {
	// Upstream receives the sessions and their updates; required.
	Upstream Upstream
	// Now stamps op 3 updates (default time.Now).
	Now func() time.Time
	// Deferred, when set, tells which errors of Upstream.Update leave
	// the update standing locally anyway: upstream gets it with the next
	// re-report (a presence node that cannot be reached). Default: none,
	// an update stands only when upstream took it.
	Deferred func(error) bool
}

// LocalSessions is a gateway node's record of its own sessions' states
// (client kind, last status and activities), kept so that the node can
// re-report them: that is how a restarted presence role rebuilds.
//
// One mutex orders every change of a state with its call upstream, so a
// re-report never carries a state older than one upstream already
// applied, and a re-report racing an identify never drops the new
// session.
type LocalSessions struct {
	cfg LocalSessionsConfig

	mu     sync.Mutex
	states map[event.SessionID]SessionState
}

// NewLocalSessions returns an empty record sending to cfg.Upstream.
func NewLocalSessions(cfg LocalSessionsConfig) *LocalSessions {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &LocalSessions{cfg: cfg, states: make(map[event.SessionID]SessionState)}
}

// Start records a session that identified and connects it upstream. The
// state is kept even when Connect fails: the next re-report carries it.
func (l *LocalSessions) Start(ctx context.Context, st SessionState) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states[st.Session] = st
	return l.cfg.Upstream.Connect(ctx, st)
}

// End forgets a session and disconnects it upstream.
func (l *LocalSessions) End(ctx context.Context, id event.SessionID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.states, id)
	l.cfg.Upstream.Disconnect(ctx, id)
}

// Report sends upstream the states of sessions (all the node holds now)
// as node's, and forgets the states of sessions the node no longer
// holds.
func (l *LocalSessions) Report(ctx context.Context, node string, sessions []event.Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := make(map[event.SessionID]bool, len(sessions))
	out := make([]SessionState, 0, len(sessions))
	for _, s := range sessions {
		if st, ok := l.states[s.ID]; ok {
			keep[s.ID] = true
			out = append(out, st)
		}
	}
	for id := range l.states {
		if !keep[id] {
			delete(l.states, id)
		}
	}
	l.cfg.Upstream.Report(ctx, node, out)
}

// Apply stamps a valid op 3 update, hands it upstream and records it as
// the session's state for later re-reports. When upstream does not know
// the session (it restarted and has not heard this node's re-report
// yet), the session connects again with the update applied.
func (l *LocalSessions) Apply(ctx context.Context, id event.SessionID, u Update) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	u.At = l.cfg.Now()
	st, known := l.states[id]
	err := l.cfg.Upstream.Update(ctx, id, u)
	if errors.Is(err, ErrUnknownSession) && known {
		st.Status, st.AFK, st.Activities, st.UpdatedAt = u.Status, u.AFK, u.Activities, u.At
		err = l.cfg.Upstream.Connect(ctx, st)
	}
	if known && (err == nil || (l.cfg.Deferred != nil && l.cfg.Deferred(err))) {
		st.Status, st.AFK, st.Activities, st.UpdatedAt = u.Status, u.AFK, u.Activities, u.At
		l.states[id] = st
	}
	return err
}
