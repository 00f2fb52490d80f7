package presence

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type broadcast struct {
	user    snowflake.ID
	p       Presence
	friends []snowflake.ID
}

// recorder is a Router that records broadcasts.
type recorder struct {
	mu  sync.Mutex
	got []broadcast
}

func (r *recorder) Broadcast(_ context.Context, userID snowflake.ID, p Presence, friends []snowflake.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, broadcast{userID, p, friends})
}

func (r *recorder) take() []broadcast {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func newService(t *testing.T, cfg Config, rel Relationships) (*Service, *clock, *recorder) {
	t.Helper()
	return newServiceAt(t, t0, cfg, rel)
}

func newServiceAt(t *testing.T, start time.Time, cfg Config, rel Relationships) (*Service, *clock, *recorder) {
	t.Helper()
	c := &clock{now: start}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Now = c.Now
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	r := &recorder{}
	s, err := New(cfg, r, rel)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, r
}

func TestCoalescing(t *testing.T) {
	ctx := context.Background()
	s, c, r := newService(t, Config{Window: 5 * time.Second, NodeTTL: time.Hour}, nil)
	if err := s.Connect(ctx, SessionState{Session: "d", UserID: 1, Node: "g1", Client: Desktop, Status: Online}); err != nil {
		t.Fatal(err)
	}
	c.Advance(4 * time.Second)
	s.Tick(ctx)
	if got := r.take(); len(got) != 0 {
		t.Fatalf("broadcast before the window closed: %+v", got)
	}
	c.Advance(time.Second)
	s.Tick(ctx)
	got := r.take()
	if len(got) != 1 || got[0].p.Status != Online {
		t.Fatalf("after window: %+v", got)
	}

	// A game started and stopped inside one window costs nothing.
	c.Advance(time.Minute)
	if err := s.Update(ctx, "d", Update{Status: Online, Activities: []Activity{game("Doom")}}); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Second)
	if err := s.Update(ctx, "d", Update{Status: Online}); err != nil {
		t.Fatal(err)
	}
	c.Advance(3 * time.Second)
	s.Tick(ctx)
	if got := r.take(); len(got) != 0 {
		t.Fatalf("start+stop inside the window broadcast %+v", got)
	}
	if v := testutil.ToFloat64(s.m.coalesced); v != 1 {
		t.Fatalf("coalesced = %v", v)
	}

	// Three changes inside one window: one broadcast with the last state.
	c.Advance(time.Minute)
	for _, st := range []Status{Idle, DND, Idle} {
		if err := s.Update(ctx, "d", Update{Status: st}); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	c.Advance(2 * time.Second)
	s.Tick(ctx)
	got = r.take()
	if len(got) != 1 || got[0].p.Status != Idle {
		t.Fatalf("burst: %+v", got)
	}
}

func TestRateLimit(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newService(t, Config{UpdateBurst: 3, UpdatePeriod: 30 * time.Second}, nil)
	if err := s.Connect(ctx, SessionState{Session: "d", UserID: 1, Node: "g1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Update(ctx, "d", Update{Status: Idle}); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	err := s.Update(ctx, "d", Update{Status: Online})
	if !errors.Is(err, ErrRateLimited) || CloseCode(err) != CloseRateLimited {
		t.Fatalf("flood: err = %v, close %d", err, CloseCode(err))
	}
	c.Advance(10 * time.Second) // one token back
	if err := s.Update(ctx, "d", Update{Status: Online}); err != nil {
		t.Fatalf("after refill: %v", err)
	}
	if err := s.Update(ctx, "nope", Update{Status: Online}); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("unknown session: %v", err)
	}
	if err := s.Update(ctx, "d", Update{Status: "busy"}); CloseCode(err) != CloseDecodeError {
		t.Fatalf("bad status: %v", err)
	}
}

func TestFriendsAndDisconnect(t *testing.T) {
	ctx := context.Background()
	f := NewFriends(nil)
	if err := f.Set(ctx, 1, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, 3, 1, true); err != nil {
		t.Fatal(err)
	}
	s, c, r := newService(t, Config{}, f)
	if err := s.Connect(ctx, SessionState{Session: "d", UserID: 1, Node: "g1"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	got := r.take()
	if len(got) != 1 || len(got[0].friends) != 2 || got[0].friends[0] != 2 || got[0].friends[1] != 3 {
		t.Fatalf("broadcast = %+v", got)
	}
	s.Disconnect(ctx, "d")
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	got = r.take()
	if len(got) != 1 || got[0].p.Status != Offline {
		t.Fatalf("after disconnect = %+v", got)
	}
	if s.Sessions() != 0 || len(s.users) != 0 {
		t.Fatalf("state kept: %d sessions, %d users", s.Sessions(), len(s.users))
	}
}

// TestNodeTTL: sessions of a gateway that stops reporting expire; those
// of a gateway that keeps reporting stay.
func TestNodeTTL(t *testing.T) {
	ctx := context.Background()
	s, c, r := newService(t, Config{NodeTTL: 30 * time.Second}, nil)
	a := SessionState{Session: "a", UserID: 1, Client: Desktop, Status: Online, UpdatedAt: t0}
	b := SessionState{Session: "b", UserID: 2, Client: Mobile, Status: Idle, UpdatedAt: t0}
	s.Report(ctx, "alive", []SessionState{a})
	s.Report(ctx, "dying", []SessionState{b})
	for range 4 {
		c.Advance(10 * time.Second)
		s.Report(ctx, "alive", []SessionState{a})
		s.Tick(ctx)
	}
	if s.Get(1).Status != Online || s.Get(2).Status != Offline {
		t.Fatalf("after 40s: user 1 %s, user 2 %s", s.Get(1).Status, s.Get(2).Status)
	}
	c.Advance(5 * time.Second)
	s.Tick(ctx)
	last := map[snowflake.ID]Status{}
	for _, b := range r.take() {
		last[b.user] = b.p.Status
	}
	if last[1] != Online || last[2] != Offline {
		t.Fatalf("broadcasts = %v", last)
	}
	// A report without a session removes it.
	s.Report(ctx, "alive", nil)
	if s.Get(1).Status != Offline {
		t.Fatalf("session kept after a report without it")
	}
}

// gateway simulates a gateway node: it remembers what each of its
// sessions last told presence and re-reports it.
type gateway struct {
	name     string
	sessions map[event.SessionID]SessionState
}

func (g *gateway) connect(ctx context.Context, s *Service, st SessionState) error {
	st.Node = g.name
	g.sessions[st.Session] = st
	return s.Connect(ctx, st)
}

func (g *gateway) update(ctx context.Context, s *Service, now time.Time, id event.SessionID, u Update) error {
	u.At = now
	if err := s.Update(ctx, id, u); err != nil {
		return err
	}
	st := g.sessions[id]
	st.Status, st.AFK, st.Activities, st.UpdatedAt = u.Status, u.AFK, u.Activities, now
	if st.Status == Offline {
		st.Status = Invisible
	}
	g.sessions[id] = st
	return nil
}

func (g *gateway) report(ctx context.Context, s *Service) {
	list := make([]SessionState, 0, len(g.sessions))
	for _, st := range g.sessions {
		list = append(list, st)
	}
	s.Report(ctx, g.name, list)
}

// TestRebuildAfterCrash: a replacement service fed only the gateways'
// periodic re-reports reaches the same statuses within a minute, without
// re-broadcasting everyone, and broadcasts later changes normally.
func TestRebuildAfterCrash(t *testing.T) {
	ctx := context.Background()
	old, c, _ := newService(t, Config{}, nil)
	gws := []*gateway{{name: "g1", sessions: map[event.SessionID]SessionState{}}, {name: "g2", sessions: map[event.SessionID]SessionState{}}}
	clients := []string{Desktop, Mobile, Web}
	statuses := []Status{Online, Idle, DND, Invisible}
	const users = 40
	n := 0
	for u := snowflake.ID(1); u <= users; u++ {
		for k := range int(u%3) + 1 {
			g := gws[n%2]
			n++
			id := event.SessionID(u.String() + "-" + clients[k])
			if err := g.connect(ctx, old, SessionState{Session: id, UserID: u, Client: clients[k], Status: Online,
				Activities: []Activity{game("g" + u.String())}}); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Millisecond)
			if err := g.update(ctx, old, c.Now(), id, Update{Status: statuses[(int(u)+k)%4], AFK: k == 2,
				Activities: []Activity{game(clients[k])}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[snowflake.ID]Presence{}
	online := 0
	for u := snowflake.ID(1); u <= users; u++ {
		want[u] = old.Get(u)
		if want[u].Status != Offline {
			online++
		}
	}
	if online < users/2 {
		t.Fatalf("only %d users visible: the test would prove little", online)
	}

	// The presence node dies. A new one starts; gateways re-report every
	// 15 s.
	fresh, c2, r2 := newServiceAt(t, c.Now(), Config{Warmup: 30 * time.Second}, nil)
	c2.Advance(15 * time.Second)
	for _, g := range gws {
		g.report(ctx, fresh)
	}
	// During warmup, live changes are still broadcast: a user who
	// identifies now, and a session that ended (missing from g2's next
	// report) whose user then has no session left.
	newcomer := SessionState{Session: "new", UserID: 1000, Client: Web, Status: Online}
	if err := gws[0].connect(ctx, fresh, newcomer); err != nil {
		t.Fatal(err)
	}
	var gone snowflake.ID
	for id, st := range gws[1].sessions {
		if n := countSessions(gws, st.UserID); n == 1 && want[st.UserID].Status != Offline {
			gone = st.UserID
			delete(gws[1].sessions, id)
			break
		}
	}
	if gone == 0 {
		t.Fatal("no single-session visible user on g2")
	}
	want[gone] = OfflinePresence()
	for range 3 {
		c2.Advance(15 * time.Second)
		for _, g := range gws {
			g.report(ctx, fresh)
		}
		fresh.Tick(ctx)
	}
	live := map[snowflake.ID]Status{}
	for _, b := range r2.take() {
		live[b.user] = b.p.Status
	}
	if len(live) != 2 || live[1000] != Online || live[gone] != Offline {
		t.Fatalf("warmup broadcasts = %v, want user 1000 online and user %d offline only", live, gone)
	}
	delete(gws[0].sessions, "new")
	fresh.Disconnect(ctx, "new")
	c2.Advance(5 * time.Second)
	fresh.Tick(ctx)
	r2.take()
	for u := snowflake.ID(1); u <= users; u++ {
		if got := fresh.Get(u); !got.Equal(want[u]) {
			t.Fatalf("user %d rebuilt as %+v, want %+v", u, got, want[u])
		}
	}
	if got := r2.take(); len(got) != 0 {
		t.Fatalf("rebuild re-broadcast %d presences", len(got))
	}
	// After warmup a change is broadcast as usual.
	g := gws[0]
	var id event.SessionID
	for sid, st := range g.sessions {
		if fresh.Get(st.UserID).Status != Offline {
			id = sid
			break
		}
	}
	uid := g.sessions[id].UserID
	if err := g.update(ctx, fresh, c2.Now(), id, Update{Status: Invisible}); err != nil {
		t.Fatal(err)
	}
	c2.Advance(5 * time.Second)
	fresh.Tick(ctx)
	got := r2.take()
	if len(got) != 1 || got[0].user != uid || got[0].p.Status != Offline {
		t.Fatalf("after warmup: %+v", got)
	}
}

func countSessions(gws []*gateway, u snowflake.ID) int {
	n := 0
	for _, g := range gws {
		for _, st := range g.sessions {
			if st.UserID == u {
				n++
			}
		}
	}
	return n
}
