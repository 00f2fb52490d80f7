package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// fakeReporter records SessionReporter calls.
type fakeReporter struct {
	started chan ClientInfo
	ended   chan event.Session

	mu      sync.Mutex
	reports [][]event.Session
}

func (r *fakeReporter) SessionStarted(ctx context.Context, s event.Session, c ClientInfo) {
	r.started <- c
}

func (r *fakeReporter) SessionEnded(ctx context.Context, s event.Session) { r.ended <- s }

func (r *fakeReporter) Report(ctx context.Context, node string, sessions []event.Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, sessions)
}

// TestPresenceReporterHooks: IDENTIFY's properties and presence reach
// SessionStarted (not the op 3 handler), ReportSessions lists the node's
// sessions, and a session closed with 1000 reaches SessionEnded.
func TestPresenceReporterHooks(t *testing.T) {
	rep := &fakeReporter{started: make(chan ClientInfo, 1), ended: make(chan event.Session, 1)}
	op3 := make(chan json.RawMessage, 1)
	g := newTestGateway(t, Config{Presence: rep, OpHandlers: map[int]OpHandler{
		OpPresenceUpdate: OpHandlerFunc(func(ctx context.Context, s event.Session, op int, d json.RawMessage) error {
			op3 <- d
			return nil
		}),
	}})
	c := g.dial(t, "")
	c.hello()
	c.send(identifyFrame("tok-alice", 1, map[string]any{"presence": map[string]any{"status": "idle"}}))
	r := c.ready()
	var info ClientInfo
	select {
	case info = <-rep.started:
	case <-time.After(5 * time.Second):
		t.Fatal("SessionStarted not called")
	}
	if info.OS != "linux" || info.Browser != "test" || !strings.Contains(string(info.Presence), `"idle"`) {
		t.Fatalf("client info %+v", info)
	}
	g.node.ReportSessions(context.Background())
	rep.mu.Lock()
	if len(rep.reports) != 1 || len(rep.reports[0]) != 1 || string(rep.reports[0][0].ID) != r.SessionID {
		t.Fatalf("reports %+v", rep.reports)
	}
	rep.mu.Unlock()
	// Op 3 after IDENTIFY still goes to the handler.
	c.send(map[string]any{"op": OpPresenceUpdate, "d": map[string]any{"status": "dnd", "afk": false, "since": nil, "activities": []any{}}})
	select {
	case d := <-op3:
		if !strings.Contains(string(d), `"dnd"`) {
			t.Fatalf("op 3 %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("op 3 handler not called")
	}
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	select {
	case s := <-rep.ended:
		if string(s.ID) != r.SessionID {
			t.Fatalf("ended %s", s.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SessionEnded not called")
	}
}
