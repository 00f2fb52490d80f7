package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// fakeSessions is a gateway node's SessionBackend over a fixed list.
type fakeSessions struct {
	mu   sync.Mutex
	list []event.Session
	subs []string
}

func (f *fakeSessions) UserSessions(_ context.Context, users []snowflake.ID) []event.Session {
	var out []event.Session
	for _, s := range f.list {
		if slices.Contains(users, s.UserID) {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeSessions) SubscribeGuild(_ context.Context, id event.SessionID, g snowflake.ID) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.list {
		if s.ID == id {
			f.subs = append(f.subs, string(id)+"@"+g.String())
			return true, nil
		}
	}
	return false, nil
}

// roster is a static transport.Roster.
type roster struct{ staticDir }

func (r *roster) Nodes() []registry.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []registry.Node
	for _, n := range r.nodes {
		out = append(out, n)
	}
	return out
}

func sessionNode(t testing.TB, name string, b transport.SessionBackend) registry.Node {
	t.Helper()
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Node: name, Gateway: newRecordingSink(), Sessions: b})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return registry.Node{Name: name, Roles: []string{registry.RoleGateway}, Addr: lis.Addr().String()}
}

func TestSessionDirectoryAsksEveryGatewayNode(t *testing.T) {
	a := &fakeSessions{list: []event.Session{{ID: "a1", UserID: 7, Intents: 1 << 12, Node: "gw-a"}, {ID: "a2", UserID: 8, Node: "gw-a"}}}
	b := &fakeSessions{list: []event.Session{{ID: "b1", UserID: 7, ShardID: 1, ShardCount: 2, Node: "stale-name"}}}
	r := &roster{}
	r.set(sessionNode(t, "gw-a", a))
	r.set(sessionNode(t, "gw-b", b))
	d := transport.NewSessionDirectory(transport.ClientConfig{}, r)
	defer d.Close()
	ctx := context.Background()

	got, err := d.UserSessions(ctx, []snowflake.ID{7})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y event.Session) int { return int(x.ID[0]) - int(y.ID[0]) })
	want := []event.Session{{ID: "a1", UserID: 7, Intents: 1 << 12, Node: "gw-a"}, {ID: "b1", UserID: 7, ShardID: 1, ShardCount: 2, Node: "gw-b"}}
	if !slices.Equal(got, want) {
		t.Fatalf("UserSessions(7) = %+v, want %+v (node named by the answering node)", got, want)
	}

	if found, err := d.SubscribeGuild(ctx, event.Session{ID: "b1", Node: "gw-b"}, 99); err != nil || !found {
		t.Fatalf("SubscribeGuild b1 = %v, %v", found, err)
	}
	if found, err := d.SubscribeGuild(ctx, event.Session{ID: "gone", Node: "gw-a"}, 99); err != nil || found {
		t.Fatalf("SubscribeGuild of an ended session = %v, %v; want not found", found, err)
	}
	if b.subs[0] != "b1@99" || len(a.subs) != 0 {
		t.Fatalf("subscriptions: a %v, b %v", a.subs, b.subs)
	}
	if _, err := d.SubscribeGuild(ctx, event.Session{ID: "x", Node: "gw-zz"}, 99); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("SubscribeGuild on an unknown node: %v, want ErrUnavailable", err)
	}

	// A node that is down is skipped, and named.
	r.set(registry.Node{Name: "gw-dead", Addr: "127.0.0.1:1"})
	got, err = d.UserSessions(ctx, []snowflake.ID{8})
	if err == nil || len(got) != 1 || got[0].ID != "a2" {
		t.Fatalf("with a dead node: %+v, %v; want a2 and an error", got, err)
	}
}

// BenchmarkSessionDirectory measures one lookup of a user's sessions over
// loopback gRPC against 1, 2 and 4 gateway nodes (each holding 1000
// sessions of other users and one of the user): the cost of deriving the
// directory from the registry grows with the gateway nodes asked.
func BenchmarkSessionDirectory(b *testing.B) {
	for _, nodes := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			r := &roster{}
			for i := range nodes {
				f := &fakeSessions{}
				for j := range 1000 {
					f.list = append(f.list, event.Session{ID: event.SessionID(fmt.Sprintf("s%d-%d", i, j)), UserID: snowflake.ID(1000 + j)})
				}
				f.list = append(f.list, event.Session{ID: event.SessionID(fmt.Sprintf("me-%d", i)), UserID: 7})
				r.set(sessionNode(b, fmt.Sprintf("gw-%d", i), f))
			}
			d := transport.NewSessionDirectory(transport.ClientConfig{}, r)
			defer d.Close()
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				got, err := d.UserSessions(ctx, []snowflake.ID{7})
				if err != nil || len(got) != nodes {
					b.Fatalf("lookup: %d sessions, %v", len(got), err)
				}
			}
		})
	}
}
