package guild

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// delivered is one dispatch as one session received it.
type delivered struct {
	Node    string
	Session event.SessionID
	Type    string
	Payload json.RawMessage
}

// recordingSink records every delivery per session.
type recordingSink struct {
	mu      sync.Mutex
	all     []delivered
	batches []event.Batch
	changed chan struct{}
}

func newRecordingSink() *recordingSink { return &recordingSink{changed: make(chan struct{}, 1)} }

func (r *recordingSink) Deliver(_ context.Context, node string, b event.Batch) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	for _, t := range b.Targets {
		r.all = append(r.all, delivered{Node: node, Session: t.Session, Type: b.Type, Payload: b.Payloads[t.Variant]})
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recordingSink) of(id event.SessionID) []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivered
	for _, d := range r.all {
		if d.Session == id {
			out = append(out, d)
		}
	}
	return out
}

// waitFor waits until cond holds for the session's deliveries.
func (r *recordingSink) waitFor(t testing.TB, id event.SessionID, what string, cond func([]delivered) bool) []delivered {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ds := r.of(id)
		if cond(ds) {
			return ds
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("session %s: timed out waiting for %s; got %v", id, what, types(ds))
		}
	}
}

func types(ds []delivered) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Type)
	}
	return out
}

func count(ds []delivered, typ string) int {
	n := 0
	for _, d := range ds {
		if d.Type == typ {
			n++
		}
	}
	return n
}

type fixture struct {
	t     testing.TB
	dir   string
	store *pebble.Store
	sink  *recordingSink
	ids   *snowflake.Generator
	auth  *auth.Issuer
	svc   *Service
	clock *testClock
	// deliverTo replaces the recording sink when set (benchmarks).
	deliverTo event.Sink
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newFixture(t testing.TB) *fixture {
	return newFixtureWithSink(t, nil)
}

func newFixtureWithSink(t testing.TB, sink event.Sink) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), sink: newRecordingSink(), clock: &testClock{now: time.Now()}, deliverTo: sink}
	st, err := pebble.New(pebble.Config{Dir: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.store = st
	f.ids, err = snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f.auth, err = auth.New(auth.Config{Key: []byte("0123456789abcdef0123456789abcdef"), Password: auth.Params{Time: 1, MemoryKiB: 64, Threads: 1}}, st)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = f.newService(Config{})
	return f
}

func (f *fixture) newService(cfg Config) *Service {
	f.t.Helper()
	if cfg.Now == nil {
		cfg.Now = f.clock.Now
	}
	var sink event.Sink = f.sink
	if f.deliverTo != nil {
		sink = f.deliverTo
	}
	svc, err := NewService(cfg, Deps{Store: f.store, Sink: sink, IDs: f.ids, Auth: f.auth})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { svc.Close() })
	return svc
}

func (f *fixture) user(name string, bot bool) store.User {
	f.t.Helper()
	id, err := f.ids.Next()
	if err != nil {
		f.t.Fatal(err)
	}
	u := store.User{ID: id, Username: name, Bot: bot, CreatedAt: time.Now()}
	if err := f.store.CreateUser(context.Background(), u); err != nil {
		f.t.Fatal(err)
	}
	return u
}

// session subscribes a session for u and waits for its GUILD_CREATEs.
func (f *fixture) session(u store.User, id string, intents uint64, guilds int) event.Session {
	f.t.Helper()
	s := event.Session{ID: event.SessionID(id), UserID: u.ID, Bot: u.Bot, Intents: intents, Node: "node-" + id[:1]}
	if err := f.svc.Subscribe(context.Background(), s); err != nil {
		f.t.Fatal(err)
	}
	f.sink.waitFor(f.t, s.ID, "GUILD_CREATE", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") >= guilds })
	return s
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
