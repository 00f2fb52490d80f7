package pebble_test

import (
	"log/slog"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/adapters/store/storetest"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelError}))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func open(tb testing.TB, dir string) *pebble.Store {
	tb.Helper()
	s, err := pebble.New(pebble.Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, t.TempDir()) })
}

func BenchmarkHistory(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return open(b, b.TempDir()) })
}
