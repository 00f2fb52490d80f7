package presence

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// BenchmarkUpdateAndBroadcast measures the presence node's cost per op 3
// with 100,000 users online on two sessions each: apply the update, and
// fold and broadcast when the window closes (every op here is a real
// change, so each is broadcast).
func BenchmarkUpdateAndBroadcast(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	broadcasts := 0
	s, err := New(Config{Now: func() time.Time { return now }, NodeTTL: 1000 * time.Hour, UpdateBurst: 1 << 30,
		Logger: slog.New(slog.DiscardHandler)}, RouterFunc(func(context.Context, snowflake.ID, Presence, []snowflake.ID) { broadcasts++ }), nil)
	if err != nil {
		b.Fatal(err)
	}
	const users = 100_000
	for u := range users {
		for k, client := range []string{Desktop, Mobile} {
			if err := s.Connect(ctx, SessionState{Session: event.SessionID(fmt.Sprint(u, "-", k)), UserID: snowflake.ID(u + 1),
				Node: "g", Client: client, Status: Online}); err != nil {
				b.Fatal(err)
			}
		}
	}
	now = now.Add(time.Minute)
	s.Tick(ctx)
	broadcasts = 0
	statuses := []Status{Idle, Online}
	acts := [][]Activity{{{Name: "Doom"}}, nil}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u := i % users
		if err := s.Update(ctx, event.SessionID(fmt.Sprint(u, "-0")), Update{Status: statuses[(i/users)%2], Activities: acts[(i/users)%2]}); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			now = now.Add(10 * time.Second)
			s.Tick(ctx)
		}
	}
	now = now.Add(10 * time.Second)
	s.Tick(ctx)
	b.ReportMetric(float64(broadcasts)/float64(b.N), "broadcasts/op")
}
