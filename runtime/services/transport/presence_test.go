package transport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// TestPresenceClientRoundTrip drives a presence.Service through
// PresenceNode: sessions, op 3, re-reports and session ends reach it with
// their state, and presence errors cross the wire.
func TestPresenceClientRoundTrip(t *testing.T) {
	svc, err := presence.New(presence.Config{}, presence.RouterFunc(func(context.Context, snowflake.ID, presence.Presence, []snowflake.ID) {}), presence.NewFriends(nil))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Presence: svc})
	if err != nil {
		t.Fatal(err)
	}
	dir := &staticDir{owners: []string{"p-1"}}
	dir.set(registry.Node{Name: "p-1", Roles: []string{"presence"}, Addr: serve(t, srv)})
	c := transport.NewPresenceClient(transport.ClientConfig{}, dir)
	defer c.Close()
	ctx := context.Background()

	at := time.Unix(100, 0)
	if err := c.Connect(ctx, presence.SessionState{Session: "s1", UserID: 7, Node: "gw-1", Client: "desktop", Status: presence.Online, Activities: []presence.Activity{{Name: "chess", Type: 0}}, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(ctx, presence.SessionState{Session: "s2", UserID: 7, Node: "gw-1", Client: "mobile", Status: presence.Idle, UpdatedAt: at.Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	p := svc.Get(7)
	if p.Status != presence.Online || p.ClientStatus.Mobile != presence.Idle || len(p.Activities) != 1 || p.Activities[0].Name != "chess" {
		t.Fatalf("presence after two sessions = %+v", p)
	}
	if err := c.Update(ctx, "s1", presence.Update{Status: presence.DND, Activities: []presence.Activity{}}); err != nil {
		t.Fatal(err)
	}
	if got := svc.Get(7).Status; got != presence.DND {
		t.Fatalf("status after op 3 = %q, want dnd", got)
	}
	if err := c.Update(ctx, "nobody", presence.Update{Status: presence.Idle}); !errors.Is(err, presence.ErrUnknownSession) {
		t.Fatalf("Update of an unknown session = %v, want presence.ErrUnknownSession", err)
	}
	// A report without s1 ends it; s2 stays.
	c.Report(ctx, "gw-1", []presence.SessionState{{Session: "s2", UserID: 7, Node: "gw-1", Client: "mobile", Status: presence.Idle, UpdatedAt: at}})
	if p := svc.Get(7); p.Status != presence.Idle || p.ClientStatus.Desktop != "" {
		t.Fatalf("presence after report = %+v", p)
	}
	c.Disconnect(ctx, "s2")
	if got := svc.Get(7).Status; got != presence.Offline {
		t.Fatalf("status after the last session ended = %q, want offline", got)
	}
}

func TestPresenceClientWithoutNode(t *testing.T) {
	c := transport.NewPresenceClient(transport.ClientConfig{}, &staticDir{})
	defer c.Close()
	if err := c.Connect(context.Background(), presence.SessionState{Session: "s", UserID: 1}); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("Connect without a presence node = %v, want ErrUnavailable", err)
	}
}
