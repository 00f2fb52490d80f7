package platform

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/counters/mem"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/snowflake"
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

func newAdmission(t *testing.T, ready event.Ready, allowed uint64, concurrency int, clock *identifyClock) admission {
	t.Helper()
	c, err := mem.New(mem.Config{Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return admission{
		Backend:     fakeBackend{ready: ready},
		intents:     func(context.Context, snowflake.ID) (uint64, error) { return allowed, nil },
		apps:        fakeApps{7: {ID: 70, BotUserID: 7, Flags: 1 << 15}},
		counters:    c,
		concurrency: concurrency,
		now:         clock.now,
		log:         slog.New(slog.DiscardHandler),
	}
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
	if r.ApplicationID != 70 || r.ApplicationFlags != 1<<15 {
		t.Fatalf("READY application %d flags %d, want 70 and the app's flags", r.ApplicationID, r.ApplicationFlags)
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
	if err := ident(0); !errors.Is(err, errIdentifyLimited) {
		t.Fatalf("third identify in bucket 0 within 5 s: %v, want errIdentifyLimited", err)
	}
	clock.t = clock.t.Add(identifyWindow)
	if err := ident(2); err != nil {
		t.Fatalf("after 5 s: %v", err)
	}
}

func TestAdmissionDailyLimit(t *testing.T) {
	ctx := context.Background()
	clock := &identifyClock{t: time.Unix(1_800_000_000, 0)}
	a := newAdmission(t, event.Ready{UserID: 7, Bot: true}, 0, 1, clock)
	for i := range identifiesPerDay {
		if _, err := a.Identify(ctx, "t", event.Session{}); err != nil {
			t.Fatalf("identify %d: %v", i+1, err)
		}
		clock.t = clock.t.Add(identifyWindow)
	}
	if _, err := a.Identify(ctx, "t", event.Session{}); !errors.Is(err, errIdentifyLimited) {
		t.Fatalf("identify 1001: %v, want errIdentifyLimited", err)
	}
	clock.t = clock.t.Add(identifyDay)
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
	guilds := make([]snowflake.ID, maxGuildsPerShard+1)
	big := newAdmission(t, event.Ready{UserID: 7, Bot: true, Guilds: guilds}, 0, 1, clock)
	if _, err := big.Identify(ctx, "t", event.Session{}); !errors.Is(err, gateway.ErrShardingRequired) {
		t.Fatalf("%d guilds on one shard: %v, want ErrShardingRequired", len(guilds), err)
	}
}
