package entitlement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeSource serves grants from a map; down fails every read.
type fakeSource struct {
	mu     sync.Mutex
	grants map[snowflake.ID]Grant
	down   bool
	reads  int
}

func (s *fakeSource) Grant(_ context.Context, bot snowflake.ID) (Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.down {
		return Grant{}, errors.New("source down")
	}
	g, ok := s.grants[bot]
	if !ok {
		return Grant{}, fmt.Errorf("bot %d: %w", bot, ErrNotGoverned)
	}
	g.Guilds = slices.Clone(g.Guilds)
	return g, nil
}

func (s *fakeSource) set(bot snowflake.ID, g Grant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[bot] = g
}

func (s *fakeSource) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }
func (s *fakeSource) readCount() int    { s.mu.Lock(); defer s.mu.Unlock(); return s.reads }

// fakeEnforcer records what the Manager asked for.
type fakeEnforcer struct {
	mu      sync.Mutex
	revoked []string // "session/guild"
	closed  []string // "bot/reason"
}

func (e *fakeEnforcer) RevokeGuild(_ context.Context, s event.Session, g snowflake.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.revoked = append(e.revoked, fmt.Sprintf("%s/%d", s.ID, g))
}

func (e *fakeEnforcer) CloseBot(_ context.Context, bot snowflake.ID, r Reason) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = append(e.closed, fmt.Sprintf("%d/%s", bot, r))
	return 1
}

func (e *fakeEnforcer) state() ([]string, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.revoked), slices.Clone(e.closed)
}

const (
	bot    snowflake.ID = 7
	app    snowflake.ID = 70
	guildA snowflake.ID = 1 << 22 // shard 1 of 2
	guildB snowflake.ID = 2 << 22 // shard 0 of 2
)

type fixture struct {
	m     *Manager
	clock *fakeClock
	src   *fakeSource
	enf   *fakeEnforcer
	reg   *prometheus.Registry
}

// newFixture builds a Manager with TTL 10 s, renewals every 5 s, retries
// every 1 s and a 60 s grace, pushes connected, bot 7 installed in A and B.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		clock: &fakeClock{t: time.Unix(1_800_000_000, 0)},
		src:   &fakeSource{grants: map[snowflake.ID]Grant{bot: {ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildA, guildB}}}},
		enf:   &fakeEnforcer{},
		reg:   prometheus.NewRegistry(),
	}
	m, err := New(Config{TTL: 10 * time.Second, RetryEvery: time.Second, Grace: time.Minute, Now: f.clock.Now,
		Rand: func() float64 { return 0 }, Registerer: f.reg},
		f.src, f.enf, NewMemBus())
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	m.Handle(context.Background(), Notice{Snapshot: true})
	return f
}

// identify admits the bot and attaches one session.
func (f *fixture) identify(t *testing.T, id string, shard, shards int) event.Session {
	t.Helper()
	if err := f.m.Admit(context.Background(), bot); err != nil {
		t.Fatalf("admit: %v", err)
	}
	s := event.Session{ID: event.SessionID(id), UserID: bot, Bot: true, ShardID: shard, ShardCount: shards}
	f.m.Attach(s)
	return s
}

func TestRenewalRevokesRemovedGuildWithinRenewPeriod(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	reads := f.src.readCount()
	// The installation in A goes; no push arrives.
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildB}})
	f.clock.Add(4900 * time.Millisecond)
	f.m.Tick(ctx)
	if rv, _ := f.enf.state(); len(rv) != 0 || f.src.readCount() != reads {
		t.Fatalf("before RenewEvery: revoked %v, reads %d (want none, %d)", rv, f.src.readCount(), reads)
	}
	f.clock.Add(100 * time.Millisecond)
	f.m.Tick(ctx)
	rv, cl := f.enf.state()
	if !slices.Equal(rv, []string{fmt.Sprintf("s1/%d", guildA)}) || len(cl) != 0 {
		t.Fatalf("at RenewEvery: revoked %v closed %v, want s1/A only", rv, cl)
	}
	if f.src.readCount() != reads+1 {
		t.Fatalf("reads %d, want %d", f.src.readCount(), reads+1)
	}
	// A second renewal does not revoke again.
	f.clock.Add(5 * time.Second)
	f.m.Tick(ctx)
	if rv, _ := f.enf.state(); len(rv) != 1 {
		t.Fatalf("revoked again: %v", rv)
	}
	if got := testutil.ToFloat64(f.m.metrics.revocations.WithLabelValues("guild", "renewal")); got != 1 {
		t.Fatalf("revocations metric %v, want 1", got)
	}
}

func TestRenewalClosesOnTokenReset(t *testing.T) {
	f := newFixture(t)
	f.identify(t, "s1", 0, 0)
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 4, Guilds: []snowflake.ID{guildA, guildB}})
	f.clock.Add(5 * time.Second)
	f.m.Tick(context.Background())
	if _, cl := f.enf.state(); !slices.Equal(cl, []string{"7/token_reset"}) {
		t.Fatalf("closed %v, want 7/token_reset", cl)
	}
	// The lease is gone: later ticks read nothing.
	reads := f.src.readCount()
	f.clock.Add(time.Minute)
	f.m.Tick(context.Background())
	if f.src.readCount() != reads {
		t.Fatalf("a closed bot's lease still renews")
	}
}

func TestRenewalClosesWhenApplicationGone(t *testing.T) {
	f := newFixture(t)
	f.identify(t, "s1", 0, 0)
	f.src.mu.Lock()
	delete(f.src.grants, bot)
	f.src.mu.Unlock()
	f.clock.Add(5 * time.Second)
	f.m.Tick(context.Background())
	if _, cl := f.enf.state(); !slices.Equal(cl, []string{"7/application_gone"}) {
		t.Fatalf("closed %v", cl)
	}
}

func TestPushRevokesAtOnceOnTheGuildsShard(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "shard0", 0, 2)
	f.identify(t, "shard1", 1, 2)
	f.clock.Add(time.Millisecond)
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildB}})
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "r1", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: f.clock.Now().UnixNano()}}})
	if rv, _ := f.enf.state(); !slices.Equal(rv, []string{fmt.Sprintf("shard1/%d", guildA)}) {
		t.Fatalf("revoked %v, want shard1/A (A is on shard 1)", rv)
	}
	// The same push again (a redelivery) does nothing.
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "r1", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: f.clock.Now().UnixNano()}}})
	// The push made the lease due at once: the next tick re-reads and
	// finds nothing more to revoke.
	reads := f.src.readCount()
	f.m.Tick(ctx)
	if f.src.readCount() != reads+1 {
		t.Fatalf("push did not make the lease re-read")
	}
	if rv, _ := f.enf.state(); len(rv) != 1 {
		t.Fatalf("revoked %v, want one revocation", rv)
	}
}

func TestPushTokenReset(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	f.clock.Add(time.Millisecond)
	// A reset to generation 3 is the one the sessions already use.
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "old", Kind: KindTokenReset, BotUserID: bot, TokenGeneration: 3, At: f.clock.Now().UnixNano()}}})
	if _, cl := f.enf.state(); len(cl) != 0 {
		t.Fatalf("closed %v for a reset the sessions already follow", cl)
	}
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "new", Kind: KindTokenReset, BotUserID: bot, TokenGeneration: 4, At: f.clock.Now().UnixNano()}}})
	if _, cl := f.enf.state(); !slices.Equal(cl, []string{"7/token_reset"}) {
		t.Fatalf("closed %v, want 7/token_reset", cl)
	}
}

func TestPushOlderThanLeaseReadOnlyRereads(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	at := f.clock.Now().Add(-time.Second).UnixNano() // published before the lease's read
	f.identify(t, "s1", 0, 0)
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "r", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: at}}})
	if rv, _ := f.enf.state(); len(rv) != 0 {
		t.Fatalf("revoked %v on a push the lease's read already reflects", rv)
	}
}

func TestPermissionsPushOnlyRereads(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	f.clock.Add(time.Millisecond)
	reads := f.src.readCount()
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "p", Kind: KindPermissions, BotUserID: bot, GuildID: guildA, At: f.clock.Now().UnixNano()}}})
	f.m.Tick(ctx)
	rv, cl := f.enf.state()
	if len(rv) != 0 || len(cl) != 0 || f.src.readCount() != reads+1 {
		t.Fatalf("permissions push: revoked %v closed %v reads +%d; want a re-read only", rv, cl, f.src.readCount()-reads)
	}
}

func TestOutageKeepsSessionsForGraceThenCloses(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	f.src.setDown(true)
	// The lease (10 s) expires; the sessions run on until expiry + grace
	// (60 s), renewals retrying every second meanwhile.
	for range 69 {
		f.clock.Add(time.Second)
		f.m.Tick(ctx)
	}
	if _, cl := f.enf.state(); len(cl) != 0 {
		t.Fatalf("closed %v before the grace ended", cl)
	}
	if got := testutil.ToFloat64(f.m.metrics.staleLeases); got != 1 {
		t.Fatalf("stale leases %v, want 1", got)
	}
	if err := f.m.Admit(ctx, bot); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("admit during outage: %v, want ErrUnavailable", err)
	}
	f.clock.Add(time.Second) // 70 s after the read: expiry (10 s) + grace (60 s)
	f.m.Tick(ctx)
	if _, cl := f.enf.state(); !slices.Equal(cl, []string{"7/unavailable"}) {
		t.Fatalf("closed %v, want 7/unavailable at expiry + grace", cl)
	}
	if got := testutil.ToFloat64(f.m.metrics.renewals.WithLabelValues("error")); got < 60 {
		t.Fatalf("failed renewals %v, want one per second of the outage", got)
	}
}

func TestOutageEndsBeforeGrace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	f.src.setDown(true)
	for range 30 {
		f.clock.Add(time.Second)
		f.m.Tick(ctx)
	}
	f.src.setDown(false)
	f.clock.Add(time.Second)
	f.m.Tick(ctx)
	for range 120 {
		f.clock.Add(time.Second)
		f.m.Tick(ctx)
	}
	if _, cl := f.enf.state(); len(cl) != 0 {
		t.Fatalf("closed %v after the source came back", cl)
	}
}

func TestIdentifyRefusedWithoutPushes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.m.Handle(ctx, Notice{Lost: true})
	if err := f.m.Admit(ctx, bot); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("admit with pushes lost: %v, want ErrUnavailable", err)
	}
	f.m.Handle(ctx, Notice{Snapshot: true})
	if err := f.m.Admit(ctx, bot); err != nil {
		t.Fatalf("admit after the snapshot: %v", err)
	}
	if got := testutil.ToFloat64(f.m.metrics.identifyRefused); got != 1 {
		t.Fatalf("refused metric %v, want 1", got)
	}
	// A user that is no application's bot needs no lease.
	if err := f.m.Admit(ctx, 99); err != nil {
		t.Fatalf("admit a user bot: %v", err)
	}
}

func TestSnapshotAppliesMissedRevocation(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	f.clock.Add(time.Millisecond)
	f.m.Handle(ctx, Notice{Lost: true})
	// While the watch was down the bot was uninstalled from A.
	r := Revocation{ID: "missed", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: f.clock.Now().UnixNano()}
	f.m.Handle(ctx, Notice{Snapshot: true, Revocations: []Revocation{r}})
	if rv, _ := f.enf.state(); !slices.Equal(rv, []string{fmt.Sprintf("s1/%d", guildA)}) {
		t.Fatalf("revoked %v, want the missed uninstall applied", rv)
	}
	if got := testutil.ToFloat64(f.m.metrics.pushes.WithLabelValues("missed")); got != 1 {
		t.Fatalf("missed pushes %v, want 1", got)
	}
}

func TestFirstRenewalSpread(t *testing.T) {
	f := newFixture(t)
	f.m.cfg.Rand = func() float64 { return 0.999 }
	f.identify(t, "s1", 0, 0)
	reads := f.src.readCount()
	f.clock.Add(2500 * time.Millisecond) // RenewEvery × (1 − 0.999/2) ≈ 2.5025 s
	f.m.Tick(context.Background())
	if f.src.readCount() != reads {
		t.Fatal("renewed before the spread first renewal")
	}
	f.clock.Add(5 * time.Millisecond)
	f.m.Tick(context.Background())
	if f.src.readCount() != reads+1 {
		t.Fatal("the first renewal did not come at RenewEvery × (1 − Rand/2)")
	}
}

func TestLeaseDroppedWithLastSession(t *testing.T) {
	f := newFixture(t)
	s := f.identify(t, "s1", 0, 0)
	f.m.Detach(s)
	reads := f.src.readCount()
	f.clock.Add(time.Minute)
	f.m.Tick(context.Background())
	if f.src.readCount() != reads {
		t.Fatalf("a lease without sessions still renews")
	}
	if got := testutil.ToFloat64(f.m.metrics.leases); got != 0 {
		t.Fatalf("leases %v, want 0", got)
	}
}

// blockingSource holds reads until released.
type blockingSource struct {
	fakeSource
	started chan struct{}
	release chan struct{}
}

func (b *blockingSource) Grant(ctx context.Context, bot snowflake.ID) (Grant, error) {
	b.started <- struct{}{}
	<-b.release
	return b.fakeSource.Grant(ctx, bot)
}

func TestRenewalOlderThanPushDoesNotUndoIt(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	src := &blockingSource{fakeSource: fakeSource{grants: map[snowflake.ID]Grant{bot: {ApplicationID: app, Guilds: []snowflake.ID{guildA}}}},
		started: make(chan struct{}, 1), release: make(chan struct{}, 1)}
	enf := &fakeEnforcer{}
	m, err := New(Config{Now: clock.Now, Rand: func() float64 { return 0 }}, src, enf, NewMemBus())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m.Handle(ctx, Notice{Snapshot: true})
	src.release <- struct{}{}
	if err := m.Admit(ctx, bot); err != nil {
		t.Fatal(err)
	}
	<-src.started
	m.Attach(event.Session{ID: "s1", UserID: bot, Bot: true})
	clock.Add(5 * time.Second)
	done := make(chan struct{})
	go func() { m.Tick(ctx); close(done) }()
	<-src.started // the renewal is reading A as installed
	clock.Add(time.Millisecond)
	m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "r", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: clock.Now().UnixNano()}}})
	src.release <- struct{}{}
	<-done
	m.mu.Lock()
	l := m.leases[bot]
	stillA, next := l.guilds[guildA], l.next
	m.mu.Unlock()
	if stillA {
		t.Fatal("a renewal that read before the push put guild A back into the lease")
	}
	if next.After(clock.Now()) {
		t.Fatalf("the stale renewal did not make the lease due again (next %v, now %v)", next, clock.Now())
	}
}

func TestUnentitledMemberGuildRevokedOnceAtSecondRead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The bot is a member of A without an installation (the guild tier
	// never applied the uninstall, and the push was lost).
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildB}, Unentitled: []snowflake.ID{guildA}})
	f.identify(t, "s1", 0, 0)
	if rv, _ := f.enf.state(); len(rv) != 0 {
		t.Fatalf("revoked %v at the first read", rv)
	}
	for range 3 {
		f.clock.Add(5 * time.Second)
		f.m.Tick(ctx)
	}
	if rv, _ := f.enf.state(); !slices.Equal(rv, []string{fmt.Sprintf("s1/%d", guildA)}) {
		t.Fatalf("revoked %v, want s1/A exactly once", rv)
	}
}

func TestInstallInProgressIsNotRevoked(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// First read: member of A, record not yet written.
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildB}, Unentitled: []snowflake.ID{guildA}})
	f.identify(t, "s1", 0, 0)
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildA, guildB}})
	f.clock.Add(5 * time.Second)
	f.m.Tick(ctx)
	if rv, _ := f.enf.state(); len(rv) != 0 {
		t.Fatalf("revoked %v: an install that completed between reads", rv)
	}
}

func TestPushRevokesGuildInstalledSinceLastRead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildB}})
	f.identify(t, "s1", 0, 0)
	// A is installed and uninstalled again before the next renewal.
	f.clock.Add(time.Millisecond)
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "u", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: f.clock.Now().UnixNano()}}})
	if rv, _ := f.enf.state(); !slices.Equal(rv, []string{fmt.Sprintf("s1/%d", guildA)}) {
		t.Fatalf("revoked %v, want s1/A", rv)
	}
}

func TestReconnectKeepsLeaseBetweenAdmitAndAttach(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old := f.identify(t, "old", 0, 0)
	// The bot reconnects: the new identify is admitted, then the old
	// session ends before the new one attaches.
	if err := f.m.Admit(ctx, bot); err != nil {
		t.Fatal(err)
	}
	f.m.Detach(old)
	f.m.Attach(event.Session{ID: "new", UserID: bot, Bot: true})
	f.clock.Add(time.Millisecond)
	f.m.Handle(ctx, Notice{Revocations: []Revocation{{ID: "u", Kind: KindUninstall, BotUserID: bot, GuildID: guildA, At: f.clock.Now().UnixNano()}}})
	if rv, _ := f.enf.state(); !slices.Equal(rv, []string{fmt.Sprintf("new/%d", guildA)}) {
		t.Fatalf("revoked %v, want new/A: the new session lost its lease", rv)
	}
}

func TestStaleRenewalDoesNotCloseSessionsOfANewerToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.identify(t, "s1", 0, 0)
	f.m.mu.Lock()
	seen := f.m.leases[bot]
	epoch := seen.epoch
	f.m.mu.Unlock()
	// A renewal reads generation 3; meanwhile the token is reset and the
	// bot identifies with generation 4 (its old session closes).
	f.src.set(bot, Grant{ApplicationID: app, TokenGeneration: 4, Guilds: []snowflake.ID{guildA, guildB}})
	f.identify(t, "s2", 0, 0)
	f.m.apply(ctx, bot, Grant{ApplicationID: app, TokenGeneration: 3, Guilds: []snowflake.ID{guildA, guildB}}, f.clock.Now(), seen, epoch, false)
	if _, cl := f.enf.state(); !slices.Equal(cl, []string{"7/token_reset"}) {
		t.Fatalf("closed %v, want one close (of the old token's session) only", cl)
	}
	f.m.mu.Lock()
	l := f.m.leases[bot]
	f.m.mu.Unlock()
	if l == nil || l.gen != 4 || len(l.sessions) != 1 {
		t.Fatalf("lease %+v, want generation 4 with the new session", l)
	}
}
