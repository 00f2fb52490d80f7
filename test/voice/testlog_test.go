package voice

import (
	"log/slog"
	"os"
	"testing"

	"github.com/concord-chat/concord/internal/logbuf"
)

// testLogger is a debug logger for the servers a test starts: to stderr
// with CONCORD_TEST_VERBOSE, otherwise kept and printed only if the test
// fails, so a failure in CI says what the server saw.
func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if os.Getenv("CONCORD_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	buf := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", buf)
		}
	})
	return slog.New(slog.NewTextHandler(buf, opts))
}
