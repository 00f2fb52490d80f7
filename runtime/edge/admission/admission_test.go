package admission

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// fakeBackend identifies every token as one user with guilds.
type fakeBackend struct {
	gateway.Backend
	ready event.Ready
}

func (f fakeBackend) Identify(context.Context, string, event.Session) (event.Ready, error) {
	return f.ready, nil
}

// fakeApps knows one application.
type fakeApps map[snowflake.ID]bots.Application

func (f fakeApps) ApplicationByBot(_ context.Context, bot snowflake.ID) (bots.Application, error) {
	if a, ok := f[bot]; ok {
		return a, nil
	}
	return bots.Application{}, bots.ErrNotFound
}

// identifyClock is a settable clock for the identify buckets.
type identifyClock struct{ t time.Time }

func (c *identifyClock) now() time.Time { return c.t }

func newAdmission(t *testing.T, ready event.Ready, allowed uint64, concurrency int, clock *identifyClock) *Admission {
	t.Helper()
	c, err := mem.New(mem.Config{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var flags int
	if allowed&bots.PrivilegedIntents == bots.PrivilegedIntents {
		flags = bots.FlagGatewayGuildMembers | bots.FlagGatewayPresence | bots.FlagGatewayMessageContent
	}
	a, err := New(fakeBackend{ready: ready}, Config{
		Apps: fakeApps{7: {ID: 70, BotUserID: 7, Flags: flags}},
		Bots: &gateway.BotAdmission{Counters: c, Concurrency: concurrency, Now: clock.now, Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdmissionPrivilegedIntents(t *testing.T) {
	ctx := context.Background()
	clock := &identifyClock{t: time.Unix(1_800_000_000, 0)}
	a := newAdmission(t, event.Ready{UserID: 7, Bot: true}, 0, 1, clock)
	const guildMembers, messageContent = 1 << 1, 1 << 15
	for _, intents := range []uint64{guildMembers, messageContent, 1 | messageContent} {
		if _, err := a.Identify(ctx, "t", event.Session{Intents: intents}); !errors.Is(err, gateway.ErrDisallowedIntents) {
			t.Fatalf("intents %d: %v, want ErrDisallowedIntents", intents, err)
		}
	}
	r, err := a.Identify(ctx, "t", event.Session{Intents: 1 | 1<<9})
	if err != nil {
		t.Fatalf("non-privileged intents: %v", err)
	}
	if r.ApplicationID != 70 {
		t.Fatalf("READY application %d flags %d, want the application's", r.ApplicationID, r.ApplicationFlags)
	}
	b := newAdmission(t, event.Ready{UserID: 7, Bot: true}, bots.PrivilegedIntents, 1, clock)
	if _, err := b.Identify(ctx, "t", event.Session{Intents: guildMembers | messageContent}); err != nil {
		t.Fatalf("enabled privileged intents: %v", err)
	}
}

func TestAdmissionConcurrencyBuckets(t *testing.T) {
	ctx := context.Background()
	clock := &identifyClock{t: time.Unix(1_800_000_000, 0)}
	a := newAdmission(t, event.Ready{UserID: 7, Bot: true}, 0, 2, clock)
	ident := func(shard int) error {
		_, err := a.Identify(ctx, "t", event.Session{ShardID: shard, ShardCount: 4})
		return err
	}
	// max_concurrency 2: buckets shard%2; each admits 2 per 5 s.
	for _, shard := range []int{0, 1, 2, 3} {
		if err := ident(shard); err != nil {
			t.Fatalf("shard %d: %v", shard, err)
		}
	}
	if err := ident(0); !errors.Is(err, gateway.ErrIdentifyRateLimited) {
		t.Fatalf("third identify in bucket 0 within 5 s: %v, want gateway.ErrIdentifyRateLimited", err)
	}
	clock.t = clock.t.Add(gateway.BotIdentifyWindow)
	if err := ident(2); err != nil {
		t.Fatalf("after 5 s: %v", err)
	}
}

func TestAdmissionDailyLimit(t *testing.T) {
	ctx := context.Background()
	clock := &identifyClock{t: time.Unix(1_800_000_000, 0)}
	a := newAdmission(t, event.Ready{UserID: 7, Bot: true}, 0, 1, clock)
	for i := range gateway.BotIdentifiesPerDay {
		if _, err := a.Identify(ctx, "t", event.Session{}); err != nil {
			t.Fatalf("identify %d: %v", i+1, err)
		}
		clock.t = clock.t.Add(gateway.BotIdentifyWindow)
	}
	if _, err := a.Identify(ctx, "t", event.Session{}); !errors.Is(err, gateway.ErrIdentifyRateLimited) {
		t.Fatalf("identify 1001: %v, want gateway.ErrIdentifyRateLimited", err)
	}
	clock.t = clock.t.Add(gateway.BotIdentifyDay)
	if _, err := a.Identify(ctx, "t", event.Session{}); err != nil {
		t.Fatalf("identify the next day: %v", err)
	}
}

func TestAdmissionUsersAndSharding(t *testing.T) {
	ctx := context.Background()
	clock := &identifyClock{t: time.Unix(1_800_000_000, 0)}
	user := newAdmission(t, event.Ready{UserID: 8}, 0, 1, clock)
	for range 3 {
		if _, err := user.Identify(ctx, "t", event.Session{Intents: 1 << 1}); err != nil {
			t.Fatalf("a user is not limited: %v", err)
		}
	}
	guilds := make([]snowflake.ID, MaxGuildsPerShard+1)
	big := newAdmission(t, event.Ready{UserID: 7, Bot: true, Guilds: guilds}, 0, 1, clock)
	if _, err := big.Identify(ctx, "t", event.Session{}); !errors.Is(err, gateway.ErrShardingRequired) {
		t.Fatalf("%d guilds on one shard: %v, want ErrShardingRequired", len(guilds), err)
	}
}

// fakeIdentify answers every identify for one user and counts the calls.
type fakeIdentify struct {
	gateway.Backend
	user  snowflake.ID
	bot   bool
	calls int
}

func (f *fakeIdentify) Identify(context.Context, string, event.Session) (event.Ready, error) {
	f.calls++
	return event.Ready{UserID: f.user, Bot: f.bot}, nil
}

// Past the burst an identify is refused with ErrIdentifyRateLimited (op 9)
// before it reaches the store, and counted.
func TestAdmissionProcessThrottle(t *testing.T) {
	reg := prometheus.NewRegistry()
	next := &fakeIdentify{user: 7}
	a, err := New(next, Config{Throttle: gateway.NewNodeThrottle(0.001, 2, nil), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := a.Identify(ctx, "t", event.Session{}); err != nil {
			t.Fatalf("identify %d within the burst: %v", i+1, err)
		}
	}
	if _, err := a.Identify(ctx, "t", event.Session{}); !errors.Is(err, gateway.ErrIdentifyRateLimited) {
		t.Fatalf("identify past the burst: %v, want ErrIdentifyRateLimited", err)
	}
	if next.calls != 2 {
		t.Fatalf("backend saw %d identifies, want 2: a throttled identify must not reach the store", next.calls)
	}
	if got := testutil.ToFloat64(a.m.refused.WithLabelValues("node_rate")); got != 1 {
		t.Fatalf("refused{node_rate} = %v, want 1", got)
	}
	if got := testutil.CollectAndCount(a.m.lookup); got != 1 {
		t.Fatalf("lookup histogram has %d series, want 1 (ok)", got)
	}
}

// With shared counters a bot gets max_concurrency identifies per 5 s per
// bucket, counted across admissions sharing them (two gateway nodes on one
// Redis); users are not limited.
func TestAdmissionSharedBotCounters(t *testing.T) {
	c, err := mem.New(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	node := func(b *fakeIdentify) *Admission {
		a, err := New(b, Config{Bots: &gateway.BotAdmission{Counters: c, Concurrency: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ctx := context.Background()
	a1, a2 := node(&fakeIdentify{user: 42, bot: true}), node(&fakeIdentify{user: 42, bot: true})
	if _, err := a1.Identify(ctx, "t", event.Session{}); err != nil {
		t.Fatalf("first bot identify: %v", err)
	}
	if _, err := a2.Identify(ctx, "t", event.Session{}); !errors.Is(err, gateway.ErrIdentifyRateLimited) {
		t.Fatalf("second bot identify on another node within 5 s: %v, want ErrIdentifyRateLimited", err)
	}
	if got := testutil.ToFloat64(a2.m.refused.WithLabelValues("bot_limit")); got != 1 {
		t.Fatalf("refused{bot_limit} = %v, want 1", got)
	}
	user := node(&fakeIdentify{user: 43})
	for i := range 5 {
		if _, err := user.Identify(ctx, "t", event.Session{}); err != nil {
			t.Fatalf("user identify %d: %v", i+1, err)
		}
	}
}

// fakeStates answers one user's read states, or fails.
type fakeStates struct {
	states []readstate.State
	err    error
}

func (f fakeStates) States(context.Context, snowflake.ID, []snowflake.ID) ([]readstate.State, error) {
	return f.states, f.err
}

// READY carries the user's read states; a read-state outage leaves the
// list empty instead of failing the identify.
func TestAdmissionReadState(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		states fakeStates
		want   string
	}{
		{fakeStates{states: []readstate.State{{ChannelID: 5, LastReadID: 9, MentionCount: 2}}}, `"mention_count":2`},
		{fakeStates{err: errors.New("read-state node down")}, `"entries":[]`},
	} {
		a, err := New(&fakeIdentify{user: 8}, Config{States: tc.states})
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.Identify(ctx, "t", event.Session{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.ReadState), tc.want) || !strings.Contains(string(r.ReadState), `"version":1`) {
			t.Errorf("read_state = %s, want it to contain %s", r.ReadState, tc.want)
		}
	}
}
