package cluster

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/counters/mem"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/snowflake"
)

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

// TestIdentifyNodeThrottle: past the burst an identify is refused with
// ErrIdentifyRateLimited (op 9) before it reaches the store, and counted.
func TestIdentifyNodeThrottle(t *testing.T) {
	reg := prometheus.NewRegistry()
	next := &fakeIdentify{user: 7}
	cfg := Config{Redis: "mem", Identify: IdentifyConfig{Rate: 0.001, Burst: 2}}
	a, err := newIdentifyAdmission(context.Background(), cfg, next, reg, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
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

// TestIdentifyBotCounters: with shared counters a bot gets max_concurrency
// identifies per 5 s per bucket, counted across admissions sharing them
// (two gateway nodes on one Redis); users are not limited.
func TestIdentifyBotCounters(t *testing.T) {
	c, err := mem.New(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	node := func(b *fakeIdentify) *identifyAdmission {
		m, err := newIdentifyMetrics(prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return &identifyAdmission{Backend: b, m: m, bots: &gateway.BotAdmission{Counters: c, Concurrency: 1}}
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
