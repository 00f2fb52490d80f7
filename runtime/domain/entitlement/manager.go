package entitlement

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Config configures a Manager. Zero fields take the stated defaults.
type Config struct {
	// TTL is how long a grant read from the Source is trusted (default
	// 10 s). A revocation whose push is lost is applied at most
	// RenewEvery (+ the read's latency) after it was written, and never
	// later than TTL while the Source answers.
	TTL time.Duration
	// RenewEvery is the time from a successful renewal to the next
	// (default TTL/2, so one failed read does not let the lease lapse).
	RenewEvery time.Duration
	// RetryEvery is the time from a failed renewal to the next attempt
	// (default 1 s).
	RetryEvery time.Duration
	// Grace is how long past its expiry a lease that cannot be renewed
	// keeps its sessions running before they close (default 5 min).
	Grace time.Duration
	// ReadTimeout bounds one Source read and one Publish (default 2 s).
	ReadTimeout time.Duration
	// Resolution is how often Run looks for due renewals (default 100 ms).
	Resolution time.Duration
	// Concurrency bounds the renewals in flight (default 64).
	Concurrency int
	// Now is the clock (default time.Now); tests inject a fake one and
	// drive the Manager with Tick.
	Now func() time.Time
	// Rand returns a number in [0, 1) (default math/rand/v2's Float64).
	// A new lease's first renewal comes after RenewEvery × (1 − Rand()/2),
	// so that leases admitted together (a reconnect storm) do not renew
	// in phase; tests return 0.
	Rand func() float64
	// Registerer receives the metrics (default: none).
	Registerer prometheus.Registerer
	// Logger receives log lines (default: discard).
	Logger *slog.Logger
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.RenewEvery <= 0 || c.RenewEvery > c.TTL {
		c.RenewEvery = c.TTL / 2
	}
	if c.RetryEvery <= 0 {
		c.RetryEvery = time.Second
	}
	if c.Grace <= 0 {
		c.Grace = 5 * time.Minute
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 2 * time.Second
	}
	if c.Resolution <= 0 {
		c.Resolution = 100 * time.Millisecond
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// lease is one bot's entitlements on this node, shared by its sessions
// (one per shard).
type lease struct {
	bot    snowflake.ID
	app    snowflake.ID
	gen    uint32
	guilds map[snowflake.ID]bool
	// suspect are the guilds unentitled at the last read; revoked those
	// already taken from the sessions while the bot is still a member.
	suspect, revoked map[snowflake.ID]bool
	sessions         map[event.SessionID]event.Session
	// readAt is when the last successful read began; expires = readAt+TTL.
	readAt, expires time.Time
	// next is when the next renewal is due.
	next     time.Time
	renewing bool
	// pending counts admitted identifies whose session is not attached
	// yet; the lease outlives its last session while one is pending.
	pending int
	// epoch changes with every push applied, so a renewal that read the
	// Source before the push cannot undo it.
	epoch uint64
}

// Manager holds this gateway node's bot leases: it admits bot IDENTIFYs,
// renews leases from the Source, applies pushes from the Bus and closes
// sessions whose lease could not be renewed within the grace period.
// It is safe for concurrent use.
type Manager struct {
	cfg     Config
	src     Source
	enf     Enforcer
	bus     Bus
	log     *slog.Logger
	metrics *metrics

	// pushUp is true while the Bus watch follows the registry.
	pushUp atomic.Bool
	// connected is closed when pushes are first received.
	connected     chan struct{}
	connectedOnce sync.Once
	sem           chan struct{}
	wg            sync.WaitGroup

	mu     sync.Mutex
	leases map[snowflake.ID]*lease
	// seen is the id of the latest revocation applied or listed per bot.
	seen map[snowflake.ID]string
}

// New returns a Manager; Run starts its loop.
func New(cfg Config, src Source, enf Enforcer, bus Bus) (*Manager, error) {
	if src == nil || enf == nil || bus == nil {
		return nil, fmt.Errorf("%w: Source, Enforcer and Bus are required", ErrConfig)
	}
	cfg = cfg.withDefaults()
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Manager{
		cfg: cfg, src: src, enf: enf, bus: bus, log: cfg.Logger, metrics: met,
		sem:       make(chan struct{}, cfg.Concurrency),
		connected: make(chan struct{}),
		leases:    map[snowflake.ID]*lease{},
		seen:      map[snowflake.ID]string{},
	}, nil
}

// Config returns the effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Connected is closed once pushes are received for the first time;
// before that every bot identify is refused.
func (m *Manager) Connected() <-chan struct{} { return m.connected }

// PushConnected reports whether pushes are being received.
func (m *Manager) PushConnected() bool { return m.pushUp.Load() }

// Admit is called for a bot IDENTIFY before READY. It refuses (an error
// wrapping ErrUnavailable) while pushes cannot be received or the Source
// cannot be read; otherwise it reads the bot's grant and starts or
// renews its lease. A user that is no application's bot is admitted
// without a lease.
func (m *Manager) Admit(ctx context.Context, botUserID snowflake.ID) error {
	if !m.pushUp.Load() {
		m.metrics.identifyRefused.Inc()
		return fmt.Errorf("admit bot %d: revocation push not connected: %w", botUserID, ErrUnavailable)
	}
	start := m.cfg.Now()
	m.mu.Lock()
	seen := m.leases[botUserID]
	var epoch uint64
	if seen != nil {
		epoch = seen.epoch
	}
	m.mu.Unlock()
	g, err := m.read(ctx, botUserID)
	if errors.Is(err, ErrNotGoverned) {
		return nil
	}
	if err != nil {
		m.metrics.identifyRefused.Inc()
		return fmt.Errorf("admit bot %d: %w: %w", botUserID, ErrUnavailable, err)
	}
	m.apply(ctx, botUserID, g, start, seen, epoch, true)
	m.mu.Lock()
	if l := m.leases[botUserID]; l != nil {
		l.pending++
	}
	m.mu.Unlock()
	return nil
}

// Attach adds an admitted session to its bot's lease before it is
// subscribed to its guilds. A session of a bot without a lease (not
// governed) is ignored.
func (m *Manager) Attach(s event.Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.leases[s.UserID]; l != nil {
		l.sessions[s.ID] = s
		l.pending = max(0, l.pending-1)
	}
}

// Detach removes an ended session; a lease without sessions is dropped.
func (m *Manager) Detach(s event.Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[s.UserID]
	if l == nil {
		return
	}
	delete(l.sessions, s.ID)
	if len(l.sessions) == 0 && l.pending == 0 {
		delete(m.leases, s.UserID)
		m.metrics.leases.Set(float64(len(m.leases)))
	}
}

// read asks the Source with the read timeout.
func (m *Manager) read(ctx context.Context, bot snowflake.ID) (Grant, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadTimeout)
	defer cancel()
	t0 := time.Now()
	g, err := m.src.Grant(ctx, bot)
	m.metrics.renewalSeconds.Observe(time.Since(t0).Seconds())
	if err != nil && !errors.Is(err, ErrNotGoverned) {
		m.metrics.renewals.WithLabelValues("error").Inc()
		return Grant{}, err
	}
	m.metrics.renewals.WithLabelValues("ok").Inc()
	return g, err
}

// apply installs grant g of bot, read from start on while seen was the
// bot's lease at epoch. A grant read while the lease changed (a push, or
// the lease was replaced) is stale: the current lease is only made due
// again. Otherwise a new token generation closes the bot's sessions and
// guilds that left the grant are revoked. create (Admit) starts a lease
// when there is none, or a fresh one after closing the old sessions.
func (m *Manager) apply(ctx context.Context, bot snowflake.ID, g Grant, start time.Time, seen *lease, epoch uint64, create bool) {
	now := m.cfg.Now()
	m.mu.Lock()
	cur := m.leases[bot]
	if cur != nil && (cur != seen || cur.epoch != epoch) {
		if cur == seen {
			cur.renewing = false
		}
		cur.next = now
		m.mu.Unlock()
		return
	}
	if cur != nil && g.TokenGeneration != cur.gen {
		// The token was reset: the sessions holding the old one close.
		delete(m.leases, bot)
		m.metrics.leases.Set(float64(len(m.leases)))
		m.mu.Unlock()
		m.close(ctx, bot, ReasonTokenReset, "renewal")
		m.mu.Lock()
		cur = nil
	}
	if cur == nil {
		if create && m.leases[bot] == nil {
			m.leases[bot] = &lease{bot: bot, app: g.ApplicationID, gen: g.TokenGeneration, guilds: guildSet(g.Guilds),
				suspect: guildSet(g.Unentitled), revoked: map[snowflake.ID]bool{},
				sessions: map[event.SessionID]event.Session{}, readAt: start, expires: start.Add(m.cfg.TTL),
				next: now.Add(time.Duration(float64(m.cfg.RenewEvery) * (1 - m.cfg.Rand()/2)))}
			m.metrics.leases.Set(float64(len(m.leases)))
		}
		m.mu.Unlock()
		return
	}
	l := cur
	l.renewing = false
	granted, unentitled := guildSet(g.Guilds), guildSet(g.Unentitled)
	gone := revocable(l.guilds, granted, l.suspect, l.revoked, g.Unentitled)
	targets := l.sessionsOn(gone)
	for _, id := range gone {
		l.revoked[id] = true
	}
	for id := range l.revoked {
		if granted[id] || !unentitled[id] {
			delete(l.revoked, id) // installed again, or no longer a member
		}
	}
	l.guilds, l.suspect = granted, unentitled
	l.readAt, l.expires, l.next = start, start.Add(m.cfg.TTL), now.Add(m.cfg.RenewEvery)
	m.mu.Unlock()
	m.revoke(ctx, targets, "renewal")
}

// guildSession is one session to detach from one guild.
type guildSession struct {
	s     event.Session
	guild snowflake.ID
}

// sessionsOn lists the lease's sessions that carry each guild. m.mu must
// be held.
func (l *lease) sessionsOn(guilds []snowflake.ID) []guildSession {
	var out []guildSession
	for _, g := range guilds {
		for _, s := range l.sessions {
			if onShard(s, g) {
				out = append(out, guildSession{s: s, guild: g})
			}
		}
	}
	return out
}

// revoke detaches sessions from guilds through the Enforcer.
func (m *Manager) revoke(ctx context.Context, targets []guildSession, via string) {
	for _, t := range targets {
		m.enf.RevokeGuild(ctx, t.s, t.guild)
		m.metrics.revocations.WithLabelValues("guild", via).Inc()
		m.log.Info("guild entitlement revoked", "bot_id", t.s.UserID, "session_id", t.s.ID, "guild_id", t.guild, "via", via)
	}
}

// close ends a bot's sessions through the Enforcer.
func (m *Manager) close(ctx context.Context, bot snowflake.ID, reason Reason, via string) {
	n := m.enf.CloseBot(ctx, bot, reason)
	m.metrics.revocations.WithLabelValues(reason.String(), via).Inc()
	m.log.Info("bot sessions closed", "bot_id", bot, "reason", reason.String(), "via", via, "sessions", n)
}

// Tick renews every due lease and waits for the renewals; it closes the
// sessions of leases past their grace and drops leases that never got a
// session. Run calls it on its own; tests with a fake clock call it.
func (m *Manager) Tick(ctx context.Context) { m.tick(ctx, true) }

// tick is Tick; wait says whether to wait for the renewals it started.
func (m *Manager) tick(ctx context.Context, wait bool) {
	now := m.cfg.Now()
	var due []*lease
	var stale []snowflake.ID
	nstale, oldest := 0, time.Duration(0)
	m.mu.Lock()
	for bot, l := range m.leases {
		switch {
		case len(l.sessions) == 0 && now.After(l.expires):
			delete(m.leases, bot) // admitted, never attached
			continue
		case !now.Before(l.expires.Add(m.cfg.Grace)):
			delete(m.leases, bot)
			stale = append(stale, bot)
			continue
		}
		if now.After(l.expires) {
			nstale++
		}
		oldest = max(oldest, now.Sub(l.readAt))
		if !l.renewing && !now.Before(l.next) {
			l.renewing = true
			due = append(due, l)
		}
	}
	m.metrics.leases.Set(float64(len(m.leases)))
	m.metrics.staleLeases.Set(float64(nstale))
	m.metrics.leaseAgeMax.Set(oldest.Seconds())
	type job struct {
		l     *lease
		epoch uint64
	}
	jobs := make([]job, len(due))
	for i, l := range due {
		jobs[i] = job{l, l.epoch}
	}
	m.mu.Unlock()
	for _, bot := range stale {
		m.close(ctx, bot, ReasonUnavailable, "grace")
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		select {
		case m.sem <- struct{}{}:
		case <-ctx.Done():
			m.unmark(j.l)
			continue
		}
		wg.Add(1)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer wg.Done()
			defer func() { <-m.sem }()
			m.renew(ctx, j.l, j.epoch)
		}()
	}
	if wait {
		wg.Wait()
	}
}

// unmark clears a lease's renewing flag after a renewal that did not run.
func (m *Manager) unmark(l *lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l.renewing = false
}

// renew reads the grant of lease l's bot and applies it; a failed read
// leaves the lease running on its last grant and retries after
// RetryEvery.
func (m *Manager) renew(ctx context.Context, l *lease, epoch uint64) {
	bot := l.bot
	start := m.cfg.Now()
	g, err := m.read(ctx, bot)
	switch {
	case errors.Is(err, ErrNotGoverned):
		m.mu.Lock()
		mine := m.leases[bot] == l
		if mine {
			delete(m.leases, bot)
		}
		m.mu.Unlock()
		if mine {
			m.close(ctx, bot, ReasonApplicationGone, "renewal")
		}
	case err != nil:
		m.mu.Lock()
		l.renewing = false
		l.next = m.cfg.Now().Add(m.cfg.RetryEvery)
		m.mu.Unlock()
		m.log.Debug("lease renewal failed", "bot_id", bot, "err", err)
	default:
		m.apply(ctx, bot, g, start, l, epoch, false)
	}
}

// Wait waits for the renewals Run started.
func (m *Manager) Wait() { m.wg.Wait() }
