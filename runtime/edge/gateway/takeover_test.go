package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// directPeers reaches the other in-process nodes as a cluster's Peers
// does: every node but the asker is asked, the export crosses as JSON,
// and the first export wins.
type directPeers struct {
	nodes []*Node
}

func (d directPeers) Take(ctx context.Context, req TakeRequest) (*SessionExport, error) {
	refused := false
	for _, n := range d.nodes {
		if n.cfg.Node == req.To {
			continue
		}
		e, err := n.TakeSession(ctx, req)
		switch {
		case err == nil:
			b, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			var back SessionExport
			if err := json.Unmarshal(b, &back); err != nil {
				return nil, err
			}
			return &back, nil
		case errors.Is(err, ErrTokenMismatch):
			refused = true
		case errors.Is(err, ErrUnknownSession):
		default:
			return nil, err
		}
	}
	if refused {
		return nil, ErrTokenMismatch
	}
	return nil, ErrUnknownSession
}

// newTakeoverPair is a handoffPair whose nodes take sessions from each
// other.
func newTakeoverPair(t *testing.T, cfg Config) *handoffPair {
	p := newHandoffPairWith(t, cfg)
	peers := directPeers{nodes: []*Node{p.a, p.b}}
	p.a.SetPeers(peers)
	p.b.SetPeers(peers)
	return p
}

// takeovers reads a node's takeover counter for outcome.
func takeovers(n *Node, outcome string) float64 {
	return testutil.ToFloat64(n.handoff.takeovers.WithLabelValues(outcome))
}

// TestTakeoverAfterCut: the client's socket to node a drops without a
// close frame, events keep coming, and the client RESUMEs on node b: b
// takes the session from a and replays what the client missed, in order,
// then RESUMED; the sequence continues on b, a forgot the session
// without detaching it from its guilds, and a later RESUME on a takes it
// back.
func TestTakeoverAfterCut(t *testing.T) {
	p := newTakeoverPair(t, Config{})
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs
	p.r.send(sid, "MESSAGE_CREATE", `{"n":2}`)
	c.readDispatch("MESSAGE_CREATE", 2)
	// The cut: the TCP connection closes, no close frame.
	c.ws.NetConn().Close()
	for i := 3; i <= 5; i++ {
		p.r.send(sid, "MESSAGE_CREATE", fmt.Sprintf(`{"n":%d}`, i))
	}

	c2 := dialURL(t, p.urlB)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 2))
	for i := int64(3); i <= 5; i++ {
		if f := c2.readDispatch("MESSAGE_CREATE", i); string(f.D) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("seq %d d %s", i, f.D)
		}
	}
	c2.readDispatch("RESUMED", 6)
	// Events now go to b and continue the sequence.
	p.r.send(sid, "MESSAGE_CREATE", `{"n":7}`)
	c2.readDispatch("MESSAGE_CREATE", 7)

	if got := waitSession(t, p.ba.released, "release on a"); got.ID != sid {
		t.Fatalf("a released %s", got.ID)
	}
	if got := <-p.bb.adopted; got != string(sid)+` gw-b {"from":"gw-a"}` {
		t.Fatalf("b adopted %q", got)
	}
	if p.a.Sessions() != 0 || p.b.Sessions() != 1 {
		t.Fatalf("sessions: a %d, b %d; want 0, 1", p.a.Sessions(), p.b.Sessions())
	}
	select {
	case s := <-p.ba.discs:
		t.Fatalf("a disconnected %s from its guilds", s.ID)
	default:
	}
	if takeovers(p.b, "taken") != 1 || takeovers(p.a, "given") != 1 {
		t.Fatalf("takeovers: b taken %v, a given %v", takeovers(p.b, "taken"), takeovers(p.a, "given"))
	}

	// Cut again and resume on a: it takes the session back.
	c2.ws.NetConn().Close()
	p.r.send(sid, "MESSAGE_CREATE", `{"n":8}`)
	c3 := dialURL(t, p.urlA)
	c3.hello()
	c3.send(resumeFrame("tok-alice", r.SessionID, 7))
	c3.readDispatch("MESSAGE_CREATE", 8)
	c3.readDispatch("RESUMED", 9)
	p.r.send(sid, "MESSAGE_CREATE", `{"n":10}`)
	c3.readDispatch("MESSAGE_CREATE", 10)
	if p.a.Sessions() != 1 || p.b.Sessions() != 0 {
		t.Fatalf("after taking back: a %d, b %d sessions; want 1, 0", p.a.Sessions(), p.b.Sessions())
	}
}

// TestTakeoverOldSocketOpen: the client RESUMEs on b while its socket to
// a is still open (a half-open connection a cannot tell from a live
// one): a closes it with 4000 and the new connection gets the session.
func TestTakeoverOldSocketOpen(t *testing.T) {
	p := newTakeoverPair(t, Config{})
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs
	p.r.send(sid, "MESSAGE_CREATE", `{"n":2}`)
	c.readDispatch("MESSAGE_CREATE", 2)

	c2 := dialURL(t, p.urlB)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	c2.readDispatch("MESSAGE_CREATE", 2)
	c2.readDispatch("RESUMED", 3)
	c.expectClose(CloseUnknownError)
	p.r.send(sid, "MESSAGE_CREATE", `{"n":4}`)
	c2.readDispatch("MESSAGE_CREATE", 4)
	if p.a.Sessions() != 0 {
		t.Fatalf("a still holds %d sessions", p.a.Sessions())
	}
}

// TestTakeoverWrongToken: a RESUME on b with another user's token takes
// nothing: op 9, no move, and the session stays on a, resumable there
// with its own token.
func TestTakeoverWrongToken(t *testing.T) {
	p := newTakeoverPair(t, Config{})
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs
	c.ws.NetConn().Close()
	p.r.send(sid, "MESSAGE_CREATE", `{"n":2}`)

	thief := dialURL(t, p.urlB)
	thief.hello()
	thief.send(resumeFrame("tok-bob", r.SessionID, 1))
	if f := thief.read(); f.Op != OpInvalidSession || string(f.D) != "false" {
		t.Fatalf("resume with another token on b: op %d d %s, want 9 false", f.Op, f.D)
	}
	p.r.mu.Lock()
	moves, at := p.r.moves, p.r.at[sid]
	p.r.mu.Unlock()
	if moves != 0 || at != "gw-a" || p.a.Sessions() != 1 || p.b.Sessions() != 0 {
		t.Fatalf("after a refused takeover: %d moves, events to %s, sessions a %d b %d", moves, at, p.a.Sessions(), p.b.Sessions())
	}
	if takeovers(p.b, "refused") != 1 || takeovers(p.a, "refused") != 1 {
		t.Fatalf("refused: b %v, a %v", takeovers(p.b, "refused"), takeovers(p.a, "refused"))
	}
	c2 := dialURL(t, p.urlA)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	c2.readDispatch("MESSAGE_CREATE", 2)
	c2.readDispatch("RESUMED", 3)
}

// TestTakeoverUnknownSession: a session no node holds gets op 9 d:false.
func TestTakeoverUnknownSession(t *testing.T) {
	p := newTakeoverPair(t, Config{})
	c := dialURL(t, p.urlB)
	c.hello()
	c.send(resumeFrame("tok-alice", "0123456789abcdef0123456789abcdef", 1))
	if f := c.read(); f.Op != OpInvalidSession || string(f.D) != "false" {
		t.Fatalf("op %d d %s, want 9 false", f.Op, f.D)
	}
	if takeovers(p.b, "unknown") != 1 || p.b.Sessions() != 0 {
		t.Fatalf("unknown %v, sessions %d", takeovers(p.b, "unknown"), p.b.Sessions())
	}
}

// stuckPeers is a holder that does not answer until released.
type stuckPeers struct {
	asked   chan TakeRequest
	release chan error
}

func (s stuckPeers) Take(ctx context.Context, req TakeRequest) (*SessionExport, error) {
	s.asked <- req
	return nil, <-s.release
}

// TestTakeoverHolderUnreachable: when the holder does not answer, the
// client gets op 9 once Config.TakeoverTimeout passed, while the holder
// is still silent; the placeholder goes when the call ends.
func TestTakeoverHolderUnreachable(t *testing.T) {
	p := newHandoffPairWith(t, Config{TakeoverTimeout: DefaultTakeoverTimeout / 10})
	stuck := stuckPeers{asked: make(chan TakeRequest, 1), release: make(chan error, 2)}
	p.b.SetPeers(stuck)
	c := dialURL(t, p.urlB)
	c.hello()
	c.send(resumeFrame("tok-alice", "0123456789abcdef0123456789abcdef", 1))
	req := <-stuck.asked
	if req.To != "gw-b" || req.Session != "0123456789abcdef0123456789abcdef" || string(req.TokenHash) != string(func() []byte { h := hashToken("tok-alice"); return h[:] }()) {
		t.Fatalf("take request %+v", req)
	}
	// The holder has not answered: the op 9 comes from the bound.
	if f := c.read(); f.Op != OpInvalidSession || string(f.D) != "false" {
		t.Fatalf("op %d d %s, want 9 false", f.Op, f.D)
	}
	if takeovers(p.b, "timeout") != 1 {
		t.Fatalf("timeout %v", takeovers(p.b, "timeout"))
	}
	// The holder's call fails at last; the client RESUMEs again. Its
	// RESUME either finds the first call's placeholder and waits for it,
	// or, once that is gone, asks again and hears that no node holds the
	// session: op 9 either way, and nothing is left on b.
	stuck.release <- errors.New("connection refused")
	stuck.release <- ErrUnknownSession
	c.send(resumeFrame("tok-alice", "0123456789abcdef0123456789abcdef", 1))
	if f := c.read(); f.Op != OpInvalidSession {
		t.Fatalf("second resume: op %d", f.Op)
	}
	if p.b.Sessions() != 0 {
		t.Fatalf("b holds %d sessions after failed takeovers", p.b.Sessions())
	}
}

// TestTakeoverNotDuringDrain: a draining node takes no session; a drain
// and a takeover of the same session do not both move it.
func TestTakeoverNotDuringDrain(t *testing.T) {
	p := newTakeoverPair(t, Config{})
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	<-p.ba.subs
	c.ws.NetConn().Close()
	p.b.StopIdentify()
	c2 := dialURL(t, p.urlB)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	if f := c2.read(); f.Op != OpInvalidSession {
		t.Fatalf("resume on a draining node: op %d", f.Op)
	}
	p.r.mu.Lock()
	moves := p.r.moves
	p.r.mu.Unlock()
	if moves != 0 || p.a.Sessions() != 1 {
		t.Fatalf("draining node took the session: %d moves, a holds %d", moves, p.a.Sessions())
	}
	// A session already being moved is not moved again.
	s := p.a.lookup(event.SessionID(r.SessionID))
	s.mu.Lock()
	s.moving = true
	s.mu.Unlock()
	if _, err := p.a.TakeSession(context.Background(), TakeRequest{Session: s.info.ID, TokenHash: s.tokenHash[:], To: "gw-b"}); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("take of a moving session: %v", err)
	}
}

// latePeers answers a takeover only once released, whatever the asker's
// bound.
type latePeers struct {
	next    Peers
	release chan struct{}
}

func (l latePeers) Take(ctx context.Context, req TakeRequest) (*SessionExport, error) {
	<-l.release
	return l.next.Take(ctx, req)
}

// TestTakeoverLateAnswerImported: the holder hands the session over after
// the client got op 9; the events already go to b, so b imports it all
// the same, and the next RESUME there gets it with what it missed.
func TestTakeoverLateAnswerImported(t *testing.T) {
	p := newHandoffPairWith(t, Config{TakeoverTimeout: DefaultTakeoverTimeout / 10})
	late := latePeers{next: directPeers{nodes: []*Node{p.a, p.b}}, release: make(chan struct{})}
	p.b.SetPeers(late)
	c := dialURL(t, p.urlA)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	<-p.ba.subs
	c.ws.NetConn().Close()
	p.r.send(sid, "MESSAGE_CREATE", `{"n":2}`)

	c2 := dialURL(t, p.urlB)
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	if f := c2.read(); f.Op != OpInvalidSession {
		t.Fatalf("op %d, want 9 past the bound", f.Op)
	}
	close(late.release)
	// Adopted on b: imported.
	if got := <-p.bb.adopted; got != string(sid)+` gw-b {"from":"gw-a"}` {
		t.Fatalf("b adopted %q", got)
	}
	p.r.send(sid, "MESSAGE_CREATE", `{"n":3}`)
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	c2.readDispatch("MESSAGE_CREATE", 2)
	c2.readDispatch("MESSAGE_CREATE", 3)
	c2.readDispatch("RESUMED", 4)
	if p.a.Sessions() != 0 {
		t.Fatalf("a still holds %d sessions", p.a.Sessions())
	}
}
