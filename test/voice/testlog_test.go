package voice

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe for the logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testLogger is a debug logger for the servers a test starts: to stderr
// with CONCORD_TEST_VERBOSE, otherwise kept and printed only if the test
// fails, so a failure in CI says what the server saw.
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if os.Getenv("CONCORD_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	buf := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", buf)
		}
	})
	return slog.New(slog.NewTextHandler(buf, opts))
}
