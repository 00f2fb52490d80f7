package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// deliveringBackend delivers to the session from inside Subscribe, as a
// guild tier does (GUILD_CREATE, then the guild's events) before
// Subscribe returns.
type deliveringBackend struct {
	*fakeBackend
	node *Node
	// readyFirst records whether READY had been stamped (seq > 0) when
	// Subscribe ran: it must not have been.
	readyFirst chan bool
}

func (b *deliveringBackend) Subscribe(ctx context.Context, s event.Session) error {
	sess := b.node.lookup(s.ID)
	sess.mu.Lock()
	b.readyFirst <- sess.seq > 0
	sess.mu.Unlock()
	for _, t := range []string{"GUILD_CREATE", "MESSAGE_CREATE"} {
		b.node.Deliver(ctx, s.Node, event.Batch{Type: t, Payloads: []json.RawMessage{json.RawMessage(`{"t":"` + t + `"}`)},
			Targets: []event.Target{{Session: s.ID}}})
	}
	return b.fakeBackend.Subscribe(ctx, s)
}

// TestReadyAfterSubscribe: what the guild tier delivers while a session
// subscribes is held and follows READY, in order, instead of being sent
// before it or lost.
func TestReadyAfterSubscribe(t *testing.T) {
	b := &deliveringBackend{fakeBackend: newFakeBackend(), readyFirst: make(chan bool, 1)}
	n, err := NewNode(Config{Node: testNode}, b)
	if err != nil {
		t.Fatal(err)
	}
	b.node = n
	srv := httptest.NewServer(http.Handler(n))
	t.Cleanup(func() { n.Close(); srv.Close() })
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &client{t: t, ws: ws}
	c.identify("tok-alice")
	if <-b.readyFirst {
		t.Fatal("READY was stamped before the session's subscriptions ran")
	}
	c.readDispatch("GUILD_CREATE", 2)
	if f := c.readDispatch("MESSAGE_CREATE", 3); string(f.D) != `{"t":"MESSAGE_CREATE"}` {
		t.Fatalf("MESSAGE_CREATE d = %s", f.D)
	}
}
