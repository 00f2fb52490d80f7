package gateway

import (
	"bytes"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/live"
	"github.com/concord-chat/concord/runtime/live/sse"
	"github.com/concord-chat/concord/runtime/snowflake"
)

// testHub is a loaded hub of a gateway with cfg and one queued viewer
// (no connection: its frames collect in its buffer and it is woken).
func testHub(t *testing.T, cfg Config) (*hub, *viewer) {
	t.Helper()
	cfg.MaxPending, cfg.WriteTimeout = 256<<10, 10*time.Second
	g := &Gateway{cfg: cfg, m: newMetrics(nil)}
	h := newHub(g, 42)
	h.loading = false
	v := newViewer(0)
	h.viewers[v] = struct{}{}
	t.Cleanup(func() {
		h.mu.Lock()
		if h.flushTimer != nil {
			h.flushTimer.Stop()
		}
		h.mu.Unlock()
	})
	return h, v
}

// written waits for the viewer's next flush and returns what it holds.
func written(t *testing.T, v *viewer, what string) []byte {
	t.Helper()
	select {
	case <-v.wake:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not flushed within 30 s", what)
	}
	b, _, _, _ := v.take(nil)
	return b
}

func comment(seq int64, text string) live.Event {
	return live.Event{Kind: live.KindComment, Seq: seq, Comment: &live.Comment{ID: snowflake.ID(1000 + seq), StreamID: 42,
		Author: live.Author{ID: 7, Username: "a"}, Text: text, Seq: seq}}
}

// The flush rule: a stream's events reach a viewer at most once per
// FlushInterval, but a lone comment after a quiet period goes at once,
// even when viewer counts, pings or reactions were just written (they are
// bookkeeping, and wait for an event's flush to ride on instead). With an
// hour's FlushInterval any wait the rule imposed would outlast the test.
func TestLoneCommentAfterBookkeepingGoesAtOnce(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	viewers := sse.AppendEvent(nil, "viewers", "", []byte(`{"count":1}`))

	// Bookkeeping alone is written after lazyHold.
	h.mu.Lock()
	h.addPendingLocked(outFrame{frame: viewers, seq: -1, lazy: true})
	h.mu.Unlock()
	if b := written(t, v, "viewers event"); !bytes.Equal(b, viewers) {
		t.Fatalf("first flush = %q", b)
	}

	// A comment right after it: at once, not an hour later.
	h.mu.Lock()
	h.applyLocked([]live.Event{comment(1, "first")})
	h.mu.Unlock()
	if b := written(t, v, "lone comment after a viewers event"); !bytes.Contains(b, []byte(`"text":"first"`)) {
		t.Fatalf("comment flush = %q", b)
	}

	// The next comment waits FlushInterval after the last event flush,
	// and bookkeeping queued meanwhile rides on that same flush.
	h.mu.Lock()
	h.applyLocked([]live.Event{comment(2, "second")})
	h.addPendingLocked(outFrame{frame: viewers, seq: -1, lazy: true})
	armedIn, n := time.Until(h.armedFor), len(h.pending)
	h.mu.Unlock()
	if armedIn < 30*time.Minute || n != 2 {
		t.Fatalf("second comment: flush armed in %v with %d frames pending, want about an hour and 2", armedIn, n)
	}
	select {
	case <-v.wake:
		b, _, _, _ := v.take(nil)
		t.Fatalf("written within FlushInterval of the last event flush: %q", b)
	default:
	}
}

// Bookkeeping queued with an event goes in the event's flush: one write.
func TestBookkeepingRidesOnEventFlush(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.mu.Lock()
	h.addPendingLocked(outFrame{frame: pingFrame, seq: -1, lazy: true})
	h.applyLocked([]live.Event{comment(1, "hello")})
	h.mu.Unlock()
	b := written(t, v, "comment with a pending ping")
	if !bytes.HasPrefix(b, pingFrame) || !bytes.Contains(b, []byte(`"text":"hello"`)) {
		t.Fatalf("flush = %q, want the ping and the comment together", b)
	}
	h.mu.Lock()
	pending := len(h.pending)
	h.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d frames left pending", pending)
	}
}

// A bookkeeping-only flush keeps FlushInterval from the flush before it.
func TestBookkeepingKeepsFlushInterval(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.mu.Lock()
	h.applyLocked([]live.Event{comment(1, "hello")})
	h.mu.Unlock()
	written(t, v, "lone comment")
	h.mu.Lock()
	h.addPendingLocked(outFrame{frame: pingFrame, seq: -1, lazy: true})
	armedIn := time.Until(h.armedFor)
	h.mu.Unlock()
	if armedIn < 30*time.Minute {
		t.Fatalf("ping after a comment armed in %v, want about FlushInterval (an hour)", armedIn)
	}
}
