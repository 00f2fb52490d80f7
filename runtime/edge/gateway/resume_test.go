package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/event"
)

func resumeFrame(token, sid string, seq any) map[string]any {
	return map[string]any{"op": 6, "d": map[string]any{"token": token, "session_id": sid, "seq": seq}}
}

func TestResumeReplaysGapInOrder(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "?v=10&encoding=json")
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	for i := 2; i <= 6; i++ {
		g.deliver("MESSAGE_CREATE", fmt.Sprintf(`{"n":%d}`, i), sid)
	}
	c.readDispatch("MESSAGE_CREATE", 2)
	c.readDispatch("MESSAGE_CREATE", 3)
	// The phone loses signal: the TCP connection drops without a close frame.
	c.ws.UnderlyingConn().Close()
	for i := 7; i <= 9; i++ {
		g.deliver("MESSAGE_CREATE", fmt.Sprintf(`{"n":%d}`, i), sid)
	}
	c2 := g.dial(t, "?v=10&encoding=json")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 3))
	for i := int64(4); i <= 9; i++ {
		f := c2.readDispatch("MESSAGE_CREATE", i)
		if want := fmt.Sprintf(`{"n":%d}`, i); string(f.D) != want {
			t.Fatalf("seq %d d %s, want %s", i, f.D, want)
		}
	}
	c2.readDispatch("RESUMED", 10)
	g.deliver("MESSAGE_CREATE", `{"n":11}`, sid)
	c2.readDispatch("MESSAGE_CREATE", 11)
	// Heartbeats after RESUME are answered; the session is attached here.
	c2.send(`{"op":1,"d":11}`)
	if f := c2.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("op %d", f.Op)
	}
	select {
	case s := <-g.backend.discs:
		t.Fatalf("session %s disconnected on a resumable drop", s.ID)
	default:
	}
}

func TestResumeTakesOverLiveConnection(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	// The server has not noticed the old socket is gone; RESUME on a new
	// one closes the old connection and moves the session.
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, "1"))
	c2.readDispatch("RESUMED", 2)
	c.expectClose(CloseUnknownError)
	g.deliver("MESSAGE_CREATE", `{}`, event.SessionID(r.SessionID))
	c2.readDispatch("MESSAGE_CREATE", 3)
}

func TestResumeInvalidSession(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	cases := []struct {
		name string
		msg  map[string]any
	}{
		{"unknown session", resumeFrame("tok-alice", "0123456789abcdef0123456789abcdef", 1)},
		{"other user's token", resumeFrame("tok-bob", r.SessionID, 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c2 := g.dial(t, "")
			c2.hello()
			c2.send(tc.msg)
			if f := c2.read(); f.Op != OpInvalidSession || string(f.D) != "false" {
				t.Fatalf("op %d d %s, want op 9 false", f.Op, f.D)
			}
			// discordgo identifies again on the same socket after op 9.
			c2.send(identifyFrame("tok-bob", 1, nil))
			c2.ready()
		})
	}
	// A wrong token does not discard the real session.
	g.deliver("MESSAGE_CREATE", `{}`, event.SessionID(r.SessionID))
	c.readDispatch("MESSAGE_CREATE", 2)
}

func TestResumeGapGoneByEvents(t *testing.T) {
	g := newTestGateway(t, Config{ReplayMaxEvents: 3})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	waitSession(t, g.backend.subs, "subscribe")
	sid := event.SessionID(r.SessionID)
	c.ws.UnderlyingConn().Close()
	for i := 2; i <= 10; i++ {
		g.deliver("MESSAGE_CREATE", `{}`, sid)
	}
	// Seq 7 is still held (8, 9, 10 are buffered): resumable.
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 7))
	c2.readDispatch("MESSAGE_CREATE", 8)
	c2.readDispatch("MESSAGE_CREATE", 9)
	c2.readDispatch("MESSAGE_CREATE", 10)
	c2.readDispatch("RESUMED", 11)
	c2.ws.UnderlyingConn().Close()
	// Seq 1 is long gone: INVALID_SESSION, the session is discarded.
	c3 := g.dial(t, "")
	c3.hello()
	c3.send(resumeFrame("tok-alice", r.SessionID, 1))
	if f := c3.read(); f.Op != OpInvalidSession || string(f.D) != "false" {
		t.Fatalf("op %d d %s, want op 9 false", f.Op, f.D)
	}
	if s := waitSession(t, g.backend.discs, "disconnect"); s.ID != sid {
		t.Fatalf("disconnected %s, want %s", s.ID, sid)
	}
	if n := g.node.Sessions(); n != 0 {
		t.Fatalf("Sessions() = %d after invalidation", n)
	}
	// Now even a covered seq is refused: the session is gone.
	c4 := g.dial(t, "")
	c4.hello()
	c4.send(resumeFrame("tok-alice", r.SessionID, 11))
	if f := c4.read(); f.Op != OpInvalidSession {
		t.Fatalf("op %d, want 9", f.Op)
	}
}

func TestResumeGapGoneByBytes(t *testing.T) {
	g := newTestGateway(t, Config{ReplayMaxBytes: 300})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	c.ws.UnderlyingConn().Close()
	pad := fmt.Sprintf(`{"pad":"%0100d"}`, 0) // ~150-byte frames: two fit in 300 bytes
	for range 5 {
		g.deliver("MESSAGE_CREATE", pad, sid)
	}
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 3))
	if f := c2.read(); f.Op != OpInvalidSession {
		t.Fatalf("op %d, want 9: byte bound not enforced", f.Op)
	}
}

func TestResumeGapGoneByAge(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	g := newTestGateway(t, Config{ReplayMaxAge: time.Hour, Now: func() time.Time { return now }})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	g.deliver("MESSAGE_CREATE", `{"n":2}`, sid)
	now = now.Add(50 * time.Minute)
	g.deliver("MESSAGE_CREATE", `{"n":3}`, sid)
	c.readDispatch("MESSAGE_CREATE", 2)
	c.readDispatch("MESSAGE_CREATE", 3)
	c.ws.UnderlyingConn().Close()
	now = now.Add(20 * time.Minute) // READY and seq 2 are now over an hour old
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 2)) // needs seq 3: 20 min old, held
	if f := c2.readDispatch("MESSAGE_CREATE", 3); string(f.D) != `{"n":3}` {
		t.Fatalf("replayed %s", f.D)
	}
	c2.readDispatch("RESUMED", 4)
	c2.ws.UnderlyingConn().Close()
	c3 := g.dial(t, "")
	c3.hello()
	c3.send(resumeFrame("tok-alice", r.SessionID, 1)) // needs seq 2: 70 min old, gone
	if f := c3.read(); f.Op != OpInvalidSession {
		t.Fatalf("op %d, want 9: age bound not enforced", f.Op)
	}
}

func TestResumeSeqAhead(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 5))
	c2.expectClose(CloseInvalidSeq)
}

func TestResumeWindowEnds(t *testing.T) {
	g := newTestGateway(t, Config{ReplayMaxAge: 100 * time.Millisecond})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	c.ws.UnderlyingConn().Close()
	if s := waitSession(t, g.backend.discs, "disconnect after the resume window"); s.ID != event.SessionID(r.SessionID) {
		t.Fatalf("disconnected %s", s.ID)
	}
	if n := g.node.Sessions(); n != 0 {
		t.Fatalf("Sessions() = %d", n)
	}
}

func TestClientCloseEndsSession(t *testing.T) {
	for _, code := range []int{websocket.CloseNormalClosure, websocket.CloseGoingAway} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			g := newTestGateway(t, Config{})
			c := g.dial(t, "")
			r := c.identify("tok-alice")
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
			if s := waitSession(t, g.backend.discs, "disconnect"); s.ID != event.SessionID(r.SessionID) {
				t.Fatalf("disconnected %s", s.ID)
			}
			c2 := g.dial(t, "")
			c2.hello()
			c2.send(resumeFrame("tok-alice", r.SessionID, 1))
			if f := c2.read(); f.Op != OpInvalidSession {
				t.Fatalf("op %d, want 9", f.Op)
			}
		})
	}
	// discord.js closes with 4200 when it means to resume.
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	r := c.identify("tok-alice")
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4200, "resuming"), time.Now().Add(time.Second))
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	c2.readDispatch("RESUMED", 2)
}
