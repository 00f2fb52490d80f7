package gateway

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/internal/logbuf"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// pressureOf returns the pressure counter and gauge for application_id app.
func pressureOf(g *testGateway, app string) (crossings, sessions float64) {
	m := g.node.metrics
	return testutil.ToFloat64(m.bufferPressure.WithLabelValues(app)), testutil.ToFloat64(m.bufferPressureSessions.WithLabelValues(app))
}

// queueDepth is what the connection's queue holds against its bound.
func queueDepth(g *testGateway, sid event.SessionID) (int, bool) {
	s := g.node.lookup(sid)
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return 0, false
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return len(c.queue) - c.extra, true
}

// TestPressureHysteresis drives a connection's depth by hand: one
// crossing at 80 %, none again until the depth falls to 50 %, the gauge
// released on re-arm and on close.
func TestPressureHysteresis(t *testing.T) {
	logs := &logbuf.Buffer{}
	g := newTestGateway(t, Config{SendQueue: 10, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	c := newConn(g.node, nil, 10, compressNone, "")
	c.bindSession(event.Session{ID: "s1", UserID: 4242, Bot: true})
	step := func(depth int, wantCrossings, wantSessions float64) {
		t.Helper()
		c.qmu.Lock()
		c.notePressureLocked(depth)
		c.qmu.Unlock()
		if n, s := pressureOf(g, "4242"); n != wantCrossings || s != wantSessions {
			t.Fatalf("depth %d: crossings %v, sessions %v; want %v, %v", depth, n, s, wantCrossings, wantSessions)
		}
	}
	step(7, 0, 0)  // 70 %: below the mark
	step(8, 1, 1)  // 80 %: a crossing
	step(10, 1, 1) // still above: the same crossing
	step(6, 1, 1)  // 60 %: not yet re-armed
	step(9, 1, 1)
	step(5, 1, 0) // 50 %: re-armed, out of the gauge
	step(8, 2, 1) // a second crossing
	if n := strings.Count(logs.String(), "send queue under pressure"); n != 2 {
		t.Fatalf("%d pressure log lines, want one per crossing (2)", n)
	}
	if !strings.Contains(logs.String(), "application_id=4242") || !strings.Contains(logs.String(), "session_id=s1") {
		t.Fatalf("log lacks the session or application: %s", logs.String())
	}
	c.close(0, "")
	if n, s := pressureOf(g, "4242"); n != 2 || s != 0 {
		t.Fatalf("after close: crossings %v, sessions %v; want 2, 0", n, s)
	}
}

// TestPressureStalledReader fills the queue of a client that stopped
// reading: the counter and gauge move at 80 % of the bound, the gauge
// falls once the client reads again and the writer empties the queue, a
// second stall counts a second crossing, and the slow-consumer close at
// the bound releases the gauge.
func TestPressureStalledReader(t *testing.T) {
	const sendQueue = 10
	g := newTestGateway(t, Config{SendQueue: sendQueue, SendQueueBytes: 1 << 30, ReplayMaxEvents: 100000, ReplayMaxBytes: 1 << 30})
	c := g.dialSmallBuffer(t)
	r := c.identify("tok-alice") // a bot, user 1001
	sid := event.SessionID(r.SessionID)
	const app = "1001"
	seq := int64(1)
	// fill delivers until the crossing count reaches want and checks the
	// crossing happened exactly when the queue reached 80 %.
	fill := func(want float64) {
		t.Helper()
		for i := 0; ; i++ {
			if i > 20000 {
				t.Fatalf("no crossing %v after %d deliveries", want, i)
			}
			before, _ := queueDepth(g, sid)
			seq++
			g.deliver("MESSAGE_CREATE", noisyPayload(int(seq), 16<<10), sid)
			n, s := pressureOf(g, app)
			if n == want {
				depth, _ := queueDepth(g, sid)
				if depth != sendQueue*PressureHighPercent/100 || before != depth-1 || s != 1 {
					t.Fatalf("crossing at depth %d (from %d), gauge %v; want at %d, gauge 1", depth, before, s, sendQueue*PressureHighPercent/100)
				}
				return
			}
			if n != want-1 {
				t.Fatalf("crossings %v, want %v", n, want-1)
			}
		}
	}
	fill(1)
	// One more frame (90 %): the same crossing.
	seq++
	g.deliver("MESSAGE_CREATE", noisyPayload(int(seq), 16<<10), sid)
	// Still one crossing. The gauge stays up unless the blocked writer
	// finished its batch just now and took the queue (then the depth is
	// back under 50 % and the gauge rightly fell).
	if n, s := pressureOf(g, app); n != 1 {
		t.Fatalf("at 90 %%: crossings %v, want still 1", n)
	} else if depth, _ := queueDepth(g, sid); s != 1 && depth*100 > sendQueue*PressureLowPercent {
		t.Fatalf("at 90 %%: gauge %v with the queue at %d of %d", s, depth, sendQueue)
	}
	// The client reads everything: the writer drains the queue and the
	// gauge falls back.
	for want := int64(2); want <= seq; want++ {
		c.readDispatch("MESSAGE_CREATE", want)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, s := pressureOf(g, app); s != 0; _, s = pressureOf(g, app) {
		if time.Now().After(deadline) {
			t.Fatal("gauge still 1 after the client read the queue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A second stall is a second crossing.
	fill(2)
	// Up to the bound: closed as a slow consumer, out of the gauge.
	floodUntilClosed(t, g, sid, noisyPayload(0, 16<<10), 20000)
	if n, s := pressureOf(g, app); n != 2 || s != 0 {
		t.Fatalf("after the slow-consumer close: crossings %v, sessions %v; want 2, 0", n, s)
	}
	if _, attached := queueDepth(g, sid); attached {
		t.Fatal("session still attached after the slow-consumer close")
	}
}

// TestPressureLabels checks the application_id values: bots by user id
// up to the bound, then "other"; people share "user".
func TestPressureLabels(t *testing.T) {
	a := newAppLabels(2)
	for _, tc := range []struct {
		s    event.Session
		want string
	}{
		{event.Session{UserID: 11, Bot: true}, "11"},
		{event.Session{UserID: 12, Bot: true}, "12"},
		{event.Session{UserID: 13, Bot: true}, PressureOtherLabel},
		{event.Session{UserID: 11, Bot: true}, "11"},
		{event.Session{UserID: 14}, PressureUserLabel},
		{event.Session{}, PressureUserLabel},
	} {
		if got := a.label(tc.s); got != tc.want {
			t.Errorf("label(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
	if len(a.seen) != 2 {
		t.Fatalf("%d values held, bound 2", len(a.seen))
	}
}
