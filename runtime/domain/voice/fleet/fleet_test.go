package fleet

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice"
)

func TestPickLeastLoadedHealthyInRegion(t *testing.T) {
	loads := []voice.Load{
		{Server: "a", Region: "eu", Participants: 9},
		{Server: "b", Region: "eu", Participants: 3},
		{Server: "c", Region: "eu", Participants: 1, Draining: true},
		{Server: "d", Region: "eu", Participants: 0, LossRatio: 0.5},
		{Server: "e", Region: "us", Participants: 0},
	}
	q := newQualities()
	for _, l := range loads {
		l.At, l.PacketsIn = time.Unix(1, 0), 50
		q.observe(l)
	}
	for region, want := range map[string]string{"eu": "b", "us": "e", "": "e", "ap": "e"} {
		got, err := pick(loads, region, q.poor)
		if err != nil || got.Server != want {
			t.Errorf("pick(%q) = %s, %v; want %s", region, got.Server, err, want)
		}
	}
	if _, err := pick([]voice.Load{{Server: "x", Draining: true}}, "", nil); !errors.Is(err, ErrNoServer) {
		t.Fatalf("only a draining server: %v, want ErrNoServer", err)
	}
}

// memRegistry is the kv part of a registry, in memory, for this unit test.
type memRegistry struct {
	registry.Registry
	mu sync.Mutex
	kv map[string][]byte
}

func (m *memRegistry) Put(_ context.Context, k string, v []byte, _ registry.Lifetime) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[k] = v
	return nil
}

func (m *memRegistry) List(_ context.Context, p string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.kv {
		if strings.HasPrefix(k, p) {
			out[k] = v
		}
	}
	return out, nil
}

// TestRegistryFollowsReports: reports become servers; a server whose
// reports stop counts as dead after the TTL, so calls go elsewhere.
func TestRegistryFollowsReports(t *testing.T) {
	ctx := context.Background()
	reg := &memRegistry{kv: map[string][]byte{}}
	now := time.Unix(1000, 0)
	f := NewRegistry(reg, RegistryConfig{TTL: 6 * time.Second, Now: func() time.Time { return now }})
	rep := Reporter{Registry: reg}
	for _, l := range []voice.Load{
		{Server: "sfu-1", Region: "local", Endpoint: "10.0.0.1:443", Participants: 2, At: now},
		{Server: "sfu-2", Region: "local", Endpoint: "10.0.0.2:443", Participants: 5, At: now},
	} {
		if err := rep.ReportLoad(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := f.Pick(ctx, "local")
	if err != nil || s.ID != "sfu-1" || s.Endpoint != "10.0.0.1:443" {
		t.Fatalf("Pick = %+v, %v; want sfu-1", s, err)
	}
	// sfu-1 stops reporting; sfu-2 goes on.
	now = now.Add(7 * time.Second)
	if err := rep.ReportLoad(ctx, voice.Load{Server: "sfu-2", Region: "local", Endpoint: "10.0.0.2:443", Participants: 5, At: now}); err != nil {
		t.Fatal(err)
	}
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if f.Healthy("sfu-1") || !f.Healthy("sfu-2") {
		t.Fatalf("Healthy: sfu-1 %v sfu-2 %v; want false, true", f.Healthy("sfu-1"), f.Healthy("sfu-2"))
	}
	if s, _ := f.Pick(ctx, "local"); s.ID != "sfu-2" {
		t.Fatalf("after sfu-1 died Pick = %s, want sfu-2", s.ID)
	}
	if rs := f.Regions(); len(rs) != 1 || rs[0].ID != "local" {
		t.Fatalf("Regions = %+v", rs)
	}
}

// TestPickReadsAgainWhenNoneKnown: a server that reported after the last
// poll takes a call at once; the join does not wait for the next poll.
func TestPickReadsAgainWhenNoneKnown(t *testing.T) {
	ctx := context.Background()
	reg := &memRegistry{kv: map[string][]byte{}}
	now := time.Unix(1000, 0)
	f := NewRegistry(reg, RegistryConfig{Now: func() time.Time { return now }})
	if err := f.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pick(ctx, "local"); !errors.Is(err, ErrNoServer) {
		t.Fatalf("Pick with no server = %v, want ErrNoServer", err)
	}
	if err := (Reporter{Registry: reg}).ReportLoad(ctx, voice.Load{Server: "sfu-1", Region: "local", Endpoint: "10.0.0.1:443", At: now}); err != nil {
		t.Fatal(err)
	}
	if s, err := f.Pick(ctx, "local"); err != nil || s.ID != "sfu-1" {
		t.Fatalf("Pick after sfu-1 reported = %+v, %v; want sfu-1 without waiting for a poll", s, err)
	}
}

// TestLocal: the in-process fleet places on its servers and drops a
// draining one.
func TestLocal(t *testing.T) {
	l := NewLocal()
	if _, err := l.Pick(context.Background(), ""); !errors.Is(err, ErrNoServer) {
		t.Fatalf("empty fleet: %v", err)
	}
	s := newServer(t, "dev-1")
	l.Add(s)
	got, err := l.Pick(context.Background(), "")
	if err != nil || got.ID != "dev-1" || !l.Healthy("dev-1") {
		t.Fatalf("Pick = %+v, %v", got, err)
	}
	s.Drain(time.Time{})
	if l.Healthy("dev-1") {
		t.Fatal("a draining server is healthy")
	}
	l.Disconnect(context.Background(), "dev-1", 1, 2, snowflake.ID(3)) // no such user: no effect, no panic
}

func newServer(t *testing.T, id string) *voice.Server {
	t.Helper()
	k, err := tokenKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := voice.New(voice.Config{ID: id, Region: "local", Endpoint: "127.0.0.1:1", UDPAddr: "127.0.0.1:0", TrustedKeys: k})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// TestSuspect: a suspected server whose gateway refuses the probe stops
// being healthy at once and is healthy again when it reports afterwards;
// one that accepts stays healthy.
func TestSuspect(t *testing.T) {
	ctx := context.Background()
	reg := &memRegistry{kv: map[string][]byte{}}
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	probed := make(chan string, 4)
	f := NewRegistry(reg, RegistryConfig{Now: clock, Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
		defer func() { probed <- addr }()
		if addr == "dead:1" {
			return nil, errors.New("connection refused")
		}
		a, b := net.Pipe()
		b.Close()
		return a, nil
	}})
	rep := Reporter{Registry: reg}
	for _, l := range []voice.Load{{Server: "a", Endpoint: "dead:1", At: now}, {Server: "b", Endpoint: "alive:1", At: now}} {
		_ = rep.ReportLoad(ctx, l)
	}
	_ = f.Refresh(ctx)
	f.Suspect("a")
	f.Suspect("b")
	<-probed
	<-probed
	// The probe's verdict is recorded under the lock the goroutine holds
	// after dialing; Healthy takes it too, so poll it briefly.
	deadline := time.Now().Add(2 * time.Second)
	for f.Healthy("a") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if f.Healthy("a") || !f.Healthy("b") {
		t.Fatalf("after the probes: a healthy %v (refused), b healthy %v (accepted)", f.Healthy("a"), f.Healthy("b"))
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	_ = rep.ReportLoad(ctx, voice.Load{Server: "a", Endpoint: "dead:1", At: clock()})
	_ = f.Refresh(ctx)
	if !f.Healthy("a") {
		t.Fatal("a server that reported after its failed probe is still unhealthy")
	}
}

// TestServerReportsAtStart: a voice server's first load report goes out
// when it starts, not one interval later, so a fleet that reads the
// registry finds it at once.
func TestServerReportsAtStart(t *testing.T) {
	reg := &memRegistry{kv: map[string][]byte{}}
	k, err := tokenKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := voice.New(voice.Config{ID: "sfu-1", Region: "local", Endpoint: "127.0.0.1:1", UDPAddr: "127.0.0.1:0", TrustedKeys: k,
		Load: Reporter{Registry: reg}, LoadInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f := NewRegistry(reg, RegistryConfig{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv, err := f.Pick(ctx, "local")
		if err == nil && srv.ID == "sfu-1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sfu-1 not in the fleet 10 s after it started (its report interval is an hour): %v", err)
		}
		runtime.Gosched()
	}
}
