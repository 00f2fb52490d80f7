package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// router stands in for the guild tier: it sends each session's events to
// the node currently holding it, one event at a time, and moves a session
// as a guild actor does (switch, then a marker to the old node).
type router struct {
	mu    sync.Mutex
	nodes map[string]*Node
	at    map[event.SessionID]string
	moves int
}

func (r *router) send(id event.SessionID, typ, d string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	node := r.at[id]
	r.nodes[node].Deliver(context.Background(), node, event.Batch{Type: typ,
		Payloads: []json.RawMessage{json.RawMessage(d)}, Targets: []event.Target{{Session: id}}})
}

// handoffBackend is fakeBackend plus the HandoffBackend methods over a
// router.
type handoffBackend struct {
	*fakeBackend
	r        *router
	released chan event.Session
	adopted  chan string
}

func (b *handoffBackend) Subscribe(ctx context.Context, s event.Session) error {
	b.r.mu.Lock()
	b.r.at[s.ID] = s.Node
	b.r.mu.Unlock()
	return b.fakeBackend.Subscribe(ctx, s)
}

func (b *handoffBackend) MoveSession(ctx context.Context, s event.Session, to, moveID string) (int, json.RawMessage, error) {
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	old := b.r.at[s.ID]
	b.r.at[s.ID] = to
	b.r.moves++
	id, _ := json.Marshal(moveID)
	b.r.nodes[old].Deliver(ctx, old, event.Batch{Type: event.MoveMarker, Payloads: []json.RawMessage{id},
		Targets: []event.Target{{Session: s.ID}}})
	return 1, json.RawMessage(`{"from":"` + old + `"}`), nil
}

func (b *handoffBackend) ReleaseSession(ctx context.Context, s event.Session) { b.released <- s }

func (b *handoffBackend) AdoptSession(ctx context.Context, s event.Session, state json.RawMessage) error {
	b.adopted <- string(s.ID) + " " + s.Node + " " + string(state)
	return nil
}

// directSuccessor hands sessions to another in-process node, through a
// JSON round trip as over the wire.
type directSuccessor struct{ n *Node }

func (d directSuccessor) Name() string { return d.n.cfg.Node }
func (d directSuccessor) Prepare(ctx context.Context, s []event.Session) error {
	return d.n.PrepareSessions(ctx, s)
}
func (d directSuccessor) Import(ctx context.Context, e []SessionExport) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	var back []SessionExport
	if err := json.Unmarshal(b, &back); err != nil {
		return err
	}
	return d.n.ImportSessions(ctx, back)
}

// handoffPair is two nodes, a and b, behind one router.
type handoffPair struct {
	r          *router
	a, b       *Node
	ba, bb     *handoffBackend
	urlA, urlB string
}

func newHandoffPair(t *testing.T) *handoffPair { return newHandoffPairWith(t, Config{}) }

// newHandoffPairWith is newHandoffPair with cfg for both nodes (Node is
// set).
func newHandoffPairWith(t *testing.T, cfg Config) *handoffPair {
	t.Helper()
	p := &handoffPair{r: &router{nodes: map[string]*Node{}, at: map[event.SessionID]string{}}}
	mk := func(name string) (*Node, *handoffBackend, string) {
		hb := &handoffBackend{fakeBackend: newFakeBackend(), r: p.r, released: make(chan event.Session, 16), adopted: make(chan string, 16)}
		c := cfg
		c.Node = name
		n, err := NewNode(c, hb)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(http.Handler(n))
		t.Cleanup(func() { n.Close(); srv.Close() })
		p.r.nodes[name] = n
		return n, hb, "ws" + strings.TrimPrefix(srv.URL, "http") + "/gateway?v=10&encoding=json"
	}
	p.a, p.ba, p.urlA = mk("gw-a")
	p.b, p.bb, p.urlB = mk("gw-b")
	return p
}

func dialURL(t *testing.T, url string) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

// TestHandOffExportImport checks the state that crosses: the replay
// buffer's frames in order with their seqs, the token hash, and events
// queued on the successor stamped after them.
func TestHandOffExportImport(t *testing.T) {
	p := newHandoffPair(t)
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs
	for i := 2; i <= 4; i++ {
		p.r.send(sid, "MESSAGE_CREATE", fmt.Sprintf(`{"n":%d}`, i))
	}
	s := p.a.lookup(sid)
	e := p.a.moveAndExport(context.Background(), p.ba, "gw-b", s, time.Second)
	if e == nil {
		t.Fatal("no export")
	}
	if e.Seq != 4 || len(e.Frames) != 4 || e.Frames[0].T != "READY" || e.Frames[3].Seq != 4 || string(e.Frames[3].D) != `{"n":4}` {
		t.Fatalf("export seq %d frames %+v", e.Seq, e.Frames)
	}
	if string(e.State) != `{"from":"gw-a"}` {
		t.Fatalf("state %s", e.State)
	}
	// Frozen: a straggler is not stamped on the old node.
	p.a.Deliver(context.Background(), "gw-a", event.Batch{Type: "MESSAGE_CREATE",
		Payloads: []json.RawMessage{json.RawMessage(`{"late":1}`)}, Targets: []event.Target{{Session: sid}}})
	if s.seq != 4 {
		t.Fatalf("frozen session stamped seq %d", s.seq)
	}
	// Not prepared on b: events sent there now would be lost, so prepare
	// first, queue two, then import.
	if err := p.b.PrepareSessions(context.Background(), []event.Session{e.Session}); err != nil {
		t.Fatal(err)
	}
	p.r.send(sid, "MESSAGE_CREATE", `{"n":5}`)
	p.r.send(sid, "MESSAGE_CREATE", `{"n":6}`)
	if err := (directSuccessor{p.b}).Import(context.Background(), []SessionExport{*e}); err != nil {
		t.Fatal(err)
	}
	if got := <-p.bb.adopted; got != string(sid)+` gw-b {"from":"gw-a"}` {
		t.Fatalf("adopted %q", got)
	}
	got := p.b.lookup(sid)
	if got.seq != 6 || got.replay.len() != 6 || got.tokenHash != hashToken("tok-alice") || got.info.Node != "gw-b" {
		t.Fatalf("imported seq %d frames %d node %s", got.seq, got.replay.len(), got.info.Node)
	}
	// The resumed client sees the missed events, gap-free, then RESUMED.
	c2 := dialURL(t, p.urlB)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 2))
	for i := int64(3); i <= 6; i++ {
		if f := c2.readDispatch("MESSAGE_CREATE", i); string(f.D) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("seq %d d %s", i, f.D)
		}
	}
	c2.readDispatch("RESUMED", 7)
	// A wrong token is refused on the successor too.
	c3 := dialURL(t, p.urlB)
	c3.hello()
	c3.send(resumeFrame("tok-bob", r.SessionID, 2))
	if f := c3.read(); f.Op != OpInvalidSession {
		t.Fatalf("resume with another token: op %d", f.Op)
	}
}

// TestHandOffLiveClient drains a node while events flow: the client gets
// op 7, resumes on the successor and sees every event exactly once with
// gap-free seqs; a RESUME that reaches the old node again gets op 7.
func TestHandOffLiveClient(t *testing.T) {
	p := newHandoffPair(t)
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs

	const total = 3000
	sent, started := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		for i := 1; i <= total; i++ {
			p.r.send(sid, "MESSAGE_CREATE", fmt.Sprintf(`{"n":%d}`, i))
			if i == 100 {
				close(started)
			}
			// Paced, so that the move lands in the middle of the stream.
			time.Sleep(20 * time.Microsecond)
		}
	}()
	<-started
	var handErr error
	handed := make(chan struct{})
	go func() {
		defer close(handed)
		handErr = p.a.HandOff(context.Background(), directSuccessor{p.b}, HandOffOptions{})
	}()

	seen := map[int]int{}
	lastSeq := int64(1)
	read := func(c *client, until func(f wireFrame) bool) {
		for !until(wireFrame{Op: -1}) {
			f := c.read()
			if f.Op == OpDispatch {
				if *f.S != lastSeq+1 {
					t.Fatalf("seq %d after %d", *f.S, lastSeq)
				}
				lastSeq = *f.S
				if *f.T == "MESSAGE_CREATE" {
					var d struct{ N int }
					_ = json.Unmarshal(f.D, &d)
					seen[d.N]++
				}
			}
			if until(f) {
				return
			}
		}
	}
	read(c, func(f wireFrame) bool { return f.Op == OpReconnect })
	t.Logf("op 7 after seq %d; the successor stamped %d more", lastSeq, total+1-lastSeq)
	<-handed
	if handErr != nil {
		t.Fatal(handErr)
	}
	if released := waitSession(t, p.ba.released, "release"); released.ID != sid {
		t.Fatalf("released %s", released.ID)
	}
	if p.a.Sessions() != 0 {
		t.Fatalf("old node still holds %d sessions", p.a.Sessions())
	}
	// Identify is refused on the draining node.
	ci := dialURL(t, p.urlA)
	ci.hello()
	ci.send(identifyFrame("tok-bob", 1, nil))
	if f := ci.read(); f.Op != OpInvalidSession {
		t.Fatalf("identify on a draining node: op %d", f.Op)
	}
	// A resume that lands on the old node is told to reconnect.
	cOld := dialURL(t, p.urlA)
	cOld.hello()
	cOld.send(resumeFrame("tok-alice", r.SessionID, lastSeq))
	if f := cOld.read(); f.Op != OpReconnect {
		t.Fatalf("resume on the old node: op %d", f.Op)
	}
	c.ws.Close()
	c2 := dialURL(t, p.urlB)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, lastSeq))
	read(c2, func(f wireFrame) bool { return f.Op == OpDispatch && *f.T == "RESUMED" })
	<-sent
	read(c2, func(wireFrame) bool { return len(seen) == total })
	for i := 1; i <= total; i++ {
		if seen[i] != 1 {
			t.Fatalf("event %d seen %d times", i, seen[i])
		}
	}
	select {
	case s := <-p.ba.discs:
		t.Fatalf("old node disconnected %s from its guilds", s.ID)
	default:
	}
}

// TestHandOffWithoutSuccessor falls back to Drain: op 7, identifies
// refused, and the session stays resumable on the node.
func TestHandOffWithoutSuccessor(t *testing.T) {
	p := newHandoffPair(t)
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	<-p.ba.subs
	if err := p.a.HandOff(context.Background(), nil, HandOffOptions{}); err != nil {
		t.Fatal(err)
	}
	if f := c.read(); f.Op != OpReconnect {
		t.Fatalf("op %d, want 7", f.Op)
	}
	if p.a.Sessions() != 1 || !p.a.Draining() {
		t.Fatalf("sessions %d draining %v", p.a.Sessions(), p.a.Draining())
	}
	p.r.send(event.SessionID(r.SessionID), "MESSAGE_CREATE", `{"n":2}`)
	c.ws.Close()
	c2 := dialURL(t, p.urlA)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	c2.readDispatch("MESSAGE_CREATE", 2)
	c2.readDispatch("RESUMED", 3)
	if p.r.moves != 0 {
		t.Fatalf("%d moves without a successor", p.r.moves)
	}
}

// lateMarkers is a HandoffBackend whose sources are still sending to the
// old node when MoveSession returns: the test delivers the in-flight
// events and the marker itself.
type lateMarkers struct {
	*handoffBackend
	ids chan string
}

func (b *lateMarkers) MoveSession(ctx context.Context, s event.Session, to, moveID string) (int, json.RawMessage, error) {
	b.ids <- moveID
	return 1, nil, nil
}

// TestHandOffWaitsForMarkers: the export waits for the marker, so events
// a source sent before it are in the exported buffer.
func TestHandOffWaitsForMarkers(t *testing.T) {
	p := newHandoffPair(t)
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs
	lm := &lateMarkers{handoffBackend: p.ba, ids: make(chan string, 1)}
	p.a.SetHandoffBackend(lm)
	done := make(chan *SessionExport, 1)
	go func() { done <- p.a.moveAndExport(context.Background(), lm, "gw-b", p.a.lookup(sid), 5*time.Second) }()
	id := <-lm.ids
	send := func(typ, d string) {
		p.a.Deliver(context.Background(), "gw-a", event.Batch{Type: typ,
			Payloads: []json.RawMessage{json.RawMessage(d)}, Targets: []event.Target{{Session: sid}}})
	}
	send("MESSAGE_CREATE", `{"n":2}`)
	// A marker of another move does not count.
	send(event.MoveMarker, `"not-`+id+`"`)
	select {
	case e := <-done:
		t.Fatalf("exported before the marker: seq %d", e.Seq)
	default:
	}
	send("MESSAGE_CREATE", `{"n":3}`)
	send(event.MoveMarker, `"`+id+`"`)
	e := <-done
	if e == nil || e.Seq != 3 || len(e.Frames) != 3 || string(e.Frames[2].D) != `{"n":3}` {
		t.Fatalf("export %+v", e)
	}
}
