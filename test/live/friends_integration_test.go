//go:build integration

package live

import (
	"context"
	"net"
	"strings"

	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// TestGatewayReadsFriendsFromPresenceRing: a `concord serve
// --roles=live-gateway` process, which holds no relationships, reads a
// viewer's friends (the friends boost of a sampled stream) from the
// viewer's owner on the presence ring over PresenceNode.Friends. The
// presence node here is this test's: a transport server registered in
// the deployment's etcd under the presence role, holding a friendship,
// answering over gRPC as a `--roles=presence` node does for the users it
// owns. The gateway asks it for the viewer who joined, and counts the
// read as ok.
func TestGatewayReadsFriendsFromPresenceRing(t *testing.T) {
	d := setup(t)
	var endpoint string
	for _, a := range d.args {
		if e, ok := strings.CutPrefix(a, "--registry=etcd://"); ok {
			endpoint = "http://" + e
		}
	}
	ps := &friendsNode{friends: presence.NewFriends(nil), asked: make(chan snowflake.ID, 16)}
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Presence: ps})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{endpoint}, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ctx := context.Background()
	if _, err := reg.Register(ctx, registry.Node{Name: "ps-test", Roles: []string{"presence"}, Addr: lis.Addr().String()}); err != nil {
		t.Fatal(err)
	}

	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	gw := d.start(t, "gw", "--roles=live-gateway")
	register := livetest.Register(chat.url)
	alice, poster, viewer := register(t), register(t), register(t)
	if err := ps.friends.Set(ctx, poster.ID, viewer.ID, true); err != nil {
		t.Fatal(err)
	}
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{})
	s := e.CreateStream(alice, "friends")
	v := livetest.Watch(t, gw.url, s.ID, livetest.Auth(viewer.Token, ""), "")
	v.Next(livetest.Wait, "state")
	select {
	case u := <-ps.asked:
		if u != viewer.ID {
			t.Fatalf("the gateway asked the presence node for the friends of %s, want the viewer %s", u, viewer.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not ask the presence ring for the joining viewer's friends within 30 s")
	}
	e.Eventually(livetest.Wait, func() string {
		if n := livetest.Metric(t, gw.url, `concord_live_gateway_friend_fetches_total{result="ok"}`); n < 1 {
			return "no friends read counted ok"
		}
		return ""
	})
}

// friendsNode is a presence node's PresenceNode backend holding
// relationships; it records whose friends were asked.
type friendsNode struct {
	friends *presence.Friends
	asked   chan snowflake.ID
}

func (n *friendsNode) Connect(context.Context, presence.SessionState) error           { return nil }
func (n *friendsNode) Update(context.Context, event.SessionID, presence.Update) error { return nil }
func (n *friendsNode) Disconnect(context.Context, event.SessionID)                    {}
func (n *friendsNode) Report(context.Context, string, []presence.SessionState)        {}

// Friends implements transport.FriendsBackend.
func (n *friendsNode) Friends(ctx context.Context, user snowflake.ID) ([]snowflake.ID, error) {
	select {
	case n.asked <- user:
	default:
	}
	return n.friends.Friends(ctx, user)
}
