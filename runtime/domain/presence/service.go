package presence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Router delivers a user's new presence. Broadcast is called outside the
// service's lock, at most once per user per Window, in the order the
// changes became due; it must not block for long.
type Router interface {
	// Broadcast sends PRESENCE_UPDATE to the sessions of friends and hands
	// p to each of the user's guilds, which decide who sees it.
	Broadcast(ctx context.Context, userID snowflake.ID, p Presence, friends []snowflake.ID)
}

// RouterFunc adapts a function to Router.
type RouterFunc func(ctx context.Context, userID snowflake.ID, p Presence, friends []snowflake.ID)

// Broadcast calls f.
func (f RouterFunc) Broadcast(ctx context.Context, userID snowflake.ID, p Presence, friends []snowflake.ID) {
	f(ctx, userID, p, friends)
}

// Config configures a Service.
type Config struct {
	// Window is the coalescing window: a change is broadcast Window after
	// the first change since the last broadcast, and only if the presence
	// then differs from the last one broadcast. Default 5s.
	Window time.Duration
	// NodeTTL is how long a gateway node's sessions live without a Report.
	// Gateways should report every NodeTTL/3. Default 45s.
	NodeTTL time.Duration
	// Warmup is how long a new service absorbs what gateways re-report
	// without broadcasting it, so a replacement after a crash rebuilds
	// without re-announcing every user (guilds kept the frozen statuses).
	// Live changes (connects, op 3, disconnects, sessions missing from a
	// later report) are broadcast even during warmup. Default 0.
	Warmup time.Duration
	// UpdateBurst and UpdatePeriod limit op 3 per session: UpdateBurst
	// updates, refilled one per UpdatePeriod/UpdateBurst. Defaults 5 and
	// 20s.
	UpdateBurst  int
	UpdatePeriod time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Registerer receives metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) fill() {
	if c.Window <= 0 {
		c.Window = 5 * time.Second
	}
	if c.NodeTTL <= 0 {
		c.NodeTTL = 45 * time.Second
	}
	if c.UpdateBurst <= 0 {
		c.UpdateBurst = 5
	}
	if c.UpdatePeriod <= 0 {
		c.UpdatePeriod = 20 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// session is one live session and its op 3 rate limit.
type session struct {
	st     SessionState
	tokens float64
	refill time.Time
}

// user is one user with live sessions or a pending broadcast.
type user struct {
	sessions map[event.SessionID]*session
	last     Presence // as last broadcast (or absorbed in warmup)
	due      time.Time
}

// node is one gateway node's sessions.
type node struct {
	seen     time.Time
	sessions map[event.SessionID]struct{}
}

type pending struct {
	userID snowflake.ID
	due    time.Time
}

// Service aggregates sessions into presences and broadcasts coalesced
// changes. It is safe for concurrent use.
type Service struct {
	cfg     Config
	router  Router
	rel     Relationships
	started time.Time
	m       metrics

	mu       sync.Mutex
	users    map[snowflake.ID]*user
	sessions map[event.SessionID]snowflake.ID
	nodes    map[string]*node
	queue    []pending // due times ascending: every entry is now+Window
}

// New returns a service that broadcasts through router and looks friends
// up in rel (nil: nobody has friends).
func New(cfg Config, router Router, rel Relationships) (*Service, error) {
	cfg.fill()
	if router == nil {
		return nil, errors.New("presence: nil router")
	}
	s := &Service{
		cfg:      cfg,
		router:   router,
		rel:      rel,
		started:  cfg.Now(),
		users:    make(map[snowflake.ID]*user),
		sessions: make(map[event.SessionID]snowflake.ID),
		nodes:    make(map[string]*node),
	}
	if err := s.m.init(cfg.Registerer); err != nil {
		return nil, err
	}
	return s, nil
}

// Connect registers a session that identified, with IDENTIFY's presence.
// The session counts as reported by its node until the node's next
// Report. Errors wrap ErrInvalid.
func (s *Service) Connect(ctx context.Context, st SessionState) error {
	u := Update{Status: st.Status, AFK: st.AFK, Activities: st.Activities}
	if err := u.normalize(); err != nil {
		s.m.rejected.WithLabelValues("invalid").Inc()
		return err
	}
	st.Status, st.Activities = u.Status, u.Activities
	if st.Client == "" {
		st.Client = Desktop
	}
	now := s.cfg.Now()
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(st, now, false)
	return nil
}

// put stores a session state and schedules its user; reported marks a
// state from a gateway's re-report. Called with mu held.
func (s *Service) put(st SessionState, now time.Time, reported bool) {
	if old, ok := s.sessions[st.Session]; ok && old != st.UserID {
		s.remove(st.Session, now)
	}
	u := s.users[st.UserID]
	if u == nil {
		u = &user{sessions: make(map[event.SessionID]*session), last: OfflinePresence()}
		s.users[st.UserID] = u
	}
	ss := u.sessions[st.Session]
	if ss == nil {
		ss = &session{tokens: float64(s.cfg.UpdateBurst), refill: now}
		u.sessions[st.Session] = ss
		s.m.sessions.Inc()
	} else if ss.st.Node != st.Node {
		if n := s.nodes[ss.st.Node]; n != nil {
			delete(n.sessions, st.Session)
		}
	}
	ss.st = st
	s.sessions[st.Session] = st.UserID
	n := s.nodes[st.Node]
	if n == nil {
		n = &node{sessions: make(map[event.SessionID]struct{}), seen: now}
		s.nodes[st.Node] = n
	}
	n.sessions[st.Session] = struct{}{}
	s.schedule(st.UserID, u, now, reported)
}

// remove forgets a session. Called with mu held.
func (s *Service) remove(id event.SessionID, now time.Time) {
	uid, ok := s.sessions[id]
	if !ok {
		return
	}
	delete(s.sessions, id)
	u := s.users[uid]
	if ss := u.sessions[id]; ss != nil {
		if n := s.nodes[ss.st.Node]; n != nil {
			delete(n.sessions, id)
		}
		delete(u.sessions, id)
		s.m.sessions.Dec()
	}
	s.schedule(uid, u, now, false)
}

// schedule queues a user's broadcast Window from now unless one is
// queued. A state re-reported during warmup only re-learns what guilds
// already show: it becomes the last broadcast presence at once, silently,
// unless a live change (connect, update, disconnect, expiry) is pending.
func (s *Service) schedule(uid snowflake.ID, u *user, now time.Time, reported bool) {
	if reported && now.Before(s.started.Add(s.cfg.Warmup)) {
		if u.due.IsZero() {
			u.last = s.fold(u)
			s.m.absorbed.Inc()
		}
		return
	}
	if !u.due.IsZero() {
		return
	}
	u.due = now.Add(s.cfg.Window)
	s.queue = append(s.queue, pending{userID: uid, due: u.due})
}

// Update applies a client's op 3 to its session. Errors: ErrInvalid (close
// 4002), ErrRateLimited (close 4008), ErrUnknownSession.
func (s *Service) Update(ctx context.Context, id event.SessionID, upd Update) error {
	if err := upd.normalize(); err != nil {
		s.m.rejected.WithLabelValues("invalid").Inc()
		return err
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.sessions[id]
	if !ok {
		return fmt.Errorf("update %s: %w", id, ErrUnknownSession)
	}
	ss := s.users[uid].sessions[id]
	per := s.cfg.UpdatePeriod.Seconds() / float64(s.cfg.UpdateBurst)
	ss.tokens = min(float64(s.cfg.UpdateBurst), ss.tokens+now.Sub(ss.refill).Seconds()/per)
	ss.refill = now
	if ss.tokens < 1 {
		s.m.rejected.WithLabelValues("rate_limited").Inc()
		return fmt.Errorf("update %s: %w", id, ErrRateLimited)
	}
	ss.tokens--
	st := ss.st
	st.Status, st.AFK, st.Activities, st.UpdatedAt = upd.Status, upd.AFK, upd.Activities, upd.At
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = now
	}
	s.put(st, now, false)
	s.m.updates.Inc()
	return nil
}

// Disconnect forgets a session that closed (not one that may resume).
func (s *Service) Disconnect(ctx context.Context, id event.SessionID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(id, s.cfg.Now())
}

// Report is a gateway node's periodic re-report of all its sessions: it
// replaces what the service knew of the node (sessions missing from the
// report are gone) and renews the node's TTL. Invalid entries are
// skipped and counted.
func (s *Service) Report(ctx context.Context, nodeName string, sessions []SessionState) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := make(map[event.SessionID]bool, len(sessions))
	for _, st := range sessions {
		u := Update{Status: st.Status, AFK: st.AFK, Activities: st.Activities}
		if err := u.normalize(); err != nil {
			s.m.rejected.WithLabelValues("invalid").Inc()
			continue
		}
		st.Status, st.Activities, st.Node = u.Status, u.Activities, nodeName
		if st.Client == "" {
			st.Client = Desktop
		}
		keep[st.Session] = true
		if cur := s.current(st.Session); cur != nil && sameState(cur, &st) {
			continue
		}
		s.put(st, now, true)
	}
	n := s.nodes[nodeName]
	if n == nil {
		n = &node{sessions: make(map[event.SessionID]struct{})}
		s.nodes[nodeName] = n
	}
	n.seen = now
	for id := range n.sessions {
		if !keep[id] {
			s.remove(id, now)
		}
	}
}

// current returns a session's state, or nil. Called with mu held.
func (s *Service) current(id event.SessionID) *SessionState {
	uid, ok := s.sessions[id]
	if !ok {
		return nil
	}
	return &s.users[uid].sessions[id].st
}

func sameState(a, b *SessionState) bool {
	return a.UserID == b.UserID && a.Node == b.Node && a.Client == b.Client && a.Status == b.Status &&
		a.AFK == b.AFK && a.UpdatedAt.Equal(b.UpdatedAt) && slicesEqual(a.Activities, b.Activities)
}

func slicesEqual(a, b []Activity) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Get returns a user's presence as others see it now (not as last
// broadcast).
func (s *Service) Get(userID snowflake.ID) Presence {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil {
		return OfflinePresence()
	}
	return s.fold(u)
}

func (s *Service) fold(u *user) Presence {
	list := make([]*SessionState, 0, len(u.sessions))
	for _, ss := range u.sessions {
		list = append(list, &ss.st)
	}
	return Fold(list)
}

// Sessions returns how many live sessions the service knows.
func (s *Service) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Tick expires the sessions of nodes that stopped reporting and
// broadcasts every change whose window has closed. Run calls it every
// second; tests call it after moving their clock.
func (s *Service) Tick(ctx context.Context) {
	now := s.cfg.Now()
	type out struct {
		uid snowflake.ID
		p   Presence
	}
	var due []out
	s.mu.Lock()
	for name, n := range s.nodes {
		if now.Sub(n.seen) <= s.cfg.NodeTTL {
			continue
		}
		for id := range n.sessions {
			s.remove(id, now)
			s.m.expired.Inc()
		}
		delete(s.nodes, name)
		s.cfg.Logger.Info("presence node expired", "node", name)
	}
	for len(s.queue) > 0 && !s.queue[0].due.After(now) {
		pd := s.queue[0]
		s.queue = s.queue[1:]
		u := s.users[pd.userID]
		if u == nil || !u.due.Equal(pd.due) {
			continue
		}
		u.due = time.Time{}
		p := s.fold(u)
		if p.Equal(u.last) {
			s.m.coalesced.Inc()
		} else {
			u.last = p
			due = append(due, out{pd.userID, p})
		}
		if len(u.sessions) == 0 {
			delete(s.users, pd.userID)
		}
	}
	if len(s.queue) == 0 {
		s.queue = nil
	}
	s.mu.Unlock()
	for _, o := range due {
		var friends []snowflake.ID
		if s.rel != nil {
			f, err := s.rel.Friends(ctx, o.uid)
			if err != nil {
				s.cfg.Logger.Warn("presence friends lookup failed", "user_id", o.uid, "err", err)
			}
			friends = f
		}
		s.m.broadcasts.Inc()
		s.router.Broadcast(ctx, o.uid, o.p, friends)
	}
}

// Run calls Tick every interval (default one second) until ctx ends.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	lifecycle.Every(ctx, interval, s.Tick)
}
