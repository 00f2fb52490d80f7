package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// TestIdentifyNotAdmittedGetsInvalidSession: a Backend refusing an
// identify for admission answers op 9 d:false on an open socket, and the
// client may identify again on the same connection once admitted.
func TestIdentifyNotAdmittedGetsInvalidSession(t *testing.T) {
	g := newTestGateway(t, Config{})
	refuse := true
	g.backend.identify = func(string, event.Session) error {
		if refuse {
			refuse = false
			return fmt.Errorf("bucket full: %w", ErrIdentifyRateLimited)
		}
		return nil
	}
	c := g.dial(t, "")
	c.hello()
	c.send(identifyFrame("tok-alice", 1, nil))
	f := c.read()
	if f.Op != OpInvalidSession || string(f.D) != "false" {
		t.Fatalf("over-limit identify answered %+v, want op 9 d:false", f)
	}
	c.send(identifyFrame("tok-alice", 1, nil))
	if r := c.ready(); r.SessionID == "" {
		t.Fatal("second identify after op 9 got no READY")
	}
}

// TestCloseUserEndsSessions: CloseUser closes a user's sockets with the
// given code, ends the sessions for good, and leaves other users alone.
func TestCloseUserEndsSessions(t *testing.T) {
	g := newTestGateway(t, Config{})
	alice := g.dial(t, "")
	alice.identify("tok-alice")
	bob := g.dial(t, "")
	bob.identify("tok-bob")
	if n := g.node.CloseUser(context.Background(), 1001, CloseAuthenticationFailed, "token reset"); n != 1 {
		t.Fatalf("CloseUser ended %d sessions, want 1", n)
	}
	alice.expectClose(CloseAuthenticationFailed)
	if s := waitSession(t, g.backend.discs, "Disconnect of alice"); s.UserID != 1001 {
		t.Fatalf("Disconnect for user %d, want 1001", s.UserID)
	}
	if got := g.node.Sessions(); got != 1 {
		t.Fatalf("%d sessions left, want bob's only", got)
	}
}
