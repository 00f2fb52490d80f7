package transport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/registry/etcd"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
)

var session = event.Session{ID: "sess-1", UserID: 42, Bot: true, Intents: 513, ShardID: 1, ShardCount: 4, Node: "gw-a"}

func TestGuildCallsReachTheOwner(t *testing.T) {
	g1 := newRecordingGuilds("guild-1")
	n1, _ := guildNode(t, g1, transport.ServerConfig{}, nil)
	dir := &staticDir{owners: []string{"guild-1"}}
	dir.set(n1)
	c := transport.NewGuildClient(transport.ClientConfig{}, dir)
	defer c.Close()
	ctx := context.Background()

	if err := c.Subscribe(ctx, 7, session); err != nil {
		t.Fatal(err)
	}
	if got := g1.next(t); got.op != "subscribe" || got.guildID != 7 || got.session != session {
		t.Fatalf("Subscribe arrived as %+v", got)
	}
	if err := c.Disconnect(ctx, 7, session); err != nil {
		t.Fatal(err)
	}
	if got := g1.next(t); got.op != "disconnect" || got.session != session {
		t.Fatalf("Disconnect arrived as %+v", got)
	}
	status, body, err := c.Call(ctx, 7, "POST /channels/1/messages", []byte(`{"content":"hi"}`))
	if err != nil || status != 201 || string(body) != `guild-1:{"content":"hi"}` {
		t.Fatalf("Call = %d %q %v", status, body, err)
	}
	if got := g1.next(t); got.method != "POST /channels/1/messages" || got.guildID != 7 {
		t.Fatalf("Call arrived as %+v", got)
	}
	// Requests the server must refuse before reaching the backend.
	if err := c.Subscribe(ctx, 7, event.Session{}); !errors.Is(err, transport.ErrInvalid) {
		t.Fatalf("Subscribe without a session = %v, want ErrInvalid", err)
	}
	if err := c.Subscribe(ctx, 0, session); !errors.Is(err, transport.ErrInvalid) {
		t.Fatalf("Subscribe to guild 0 = %v, want ErrInvalid", err)
	}
	g1.none(t)
}

func TestGuildErrorsCrossTheWire(t *testing.T) {
	errUnknownGuild := errors.New("guild: unknown guild")
	table := []transport.ErrorCode{{Err: errUnknownGuild, Code: codes.NotFound}}
	g1 := newRecordingGuilds("guild-1")
	n1, _ := guildNode(t, g1, transport.ServerConfig{Errors: table}, nil)
	dir := &staticDir{owners: []string{"guild-1"}}
	dir.set(n1)
	c := transport.NewGuildClient(transport.ClientConfig{Errors: table}, dir)
	defer c.Close()

	g1.err = errors.Join(errors.New("loading"), errUnknownGuild)
	err := c.Subscribe(context.Background(), 9, session)
	if !errors.Is(err, errUnknownGuild) {
		t.Fatalf("domain error came back as %v", err)
	}
	if errors.Is(err, transport.ErrUnavailable) {
		t.Fatal("a domain error looks like an unavailable node")
	}
	g1.err = errors.New("something odd")
	if err := c.Subscribe(context.Background(), 9, session); err == nil || errors.Is(err, errUnknownGuild) {
		t.Fatalf("unmapped error came back as %v", err)
	}
	if _, _, err := c.Call(context.Background(), 9, "", nil); !errors.Is(err, transport.ErrInvalid) {
		t.Fatalf("Call without method = %v, want ErrInvalid", err)
	}
}

func TestGuildClientRetriesOnceOnTheNewOwner(t *testing.T) {
	g1, g2 := newRecordingGuilds("guild-1"), newRecordingGuilds("guild-2")
	n1, srv1 := guildNode(t, g1, transport.ServerConfig{}, nil)
	n2, _ := guildNode(t, g2, transport.ServerConfig{}, nil)
	srv1.Stop()
	// The ring still names the dead guild-1 first, then guild-2.
	dir := &staticDir{owners: []string{"guild-1", "guild-2"}}
	dir.set(n1)
	dir.set(n2)
	c := transport.NewGuildClient(transport.ClientConfig{}, dir)
	defer c.Close()
	if err := c.Subscribe(context.Background(), 5, session); err != nil {
		t.Fatalf("Subscribe with a stale ring = %v", err)
	}
	if got := g2.next(t); got.guildID != 5 {
		t.Fatalf("guild-2 got %+v", got)
	}

	// A node that does not own the guild refuses; the client moves on.
	g3 := newRecordingGuilds("guild-3")
	// guild-3's own ring gives every guild to guild-2.
	ring3 := &staticDir{owners: []string{"guild-2"}}
	ring3.set(n2)
	n3, _ := guildNode(t, g3, transport.ServerConfig{}, transport.OwnedBy(ring3, "guild-3"))
	dir2 := &staticDir{owners: []string{"guild-3", "guild-2"}}
	dir2.set(n2)
	dir2.set(n3)
	c2 := transport.NewGuildClient(transport.ClientConfig{}, dir2)
	defer c2.Close()
	if err := c2.Subscribe(context.Background(), 6, session); err != nil {
		t.Fatalf("Subscribe via a non-owner = %v", err)
	}
	if got := g2.next(t); got.guildID != 6 {
		t.Fatalf("guild-2 got %+v", got)
	}
	g3.none(t)

	// When the ring has nothing better, the error comes back at once.
	dir3 := &staticDir{owners: []string{"guild-3"}}
	dir3.set(n3)
	c3 := transport.NewGuildClient(transport.ClientConfig{}, dir3)
	defer c3.Close()
	if err := c3.Subscribe(context.Background(), 6, session); !errors.Is(err, transport.ErrNotOwner) {
		t.Fatalf("Subscribe via the only, non-owning node = %v, want ErrNotOwner", err)
	}
	if err := transport.NewGuildClient(transport.ClientConfig{}, &staticDir{}).Subscribe(context.Background(), 6, session); !errors.Is(err, transport.ErrNoOwner) {
		t.Fatalf("Subscribe with an empty ring = %v, want ErrNoOwner", err)
	}
}

// TestGuildNodeDeathFollowsTheRegistry kills the guild node owning a
// guild: calls fail fast while the registry still lists it, and reach
// the new owner once its lease has expired.
func TestGuildNodeDeathFollowsTheRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, endpoint, err := etcd.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop) // after the clients below have closed
	open := func() registry.Registry {
		r, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	backends := map[string]*recordingGuilds{}
	servers := map[string]*transport.Server{}
	registries := map[string]registry.Registry{}
	for _, name := range []string{"guild-1", "guild-2"} {
		backends[name] = newRecordingGuilds(name)
		n, srv := guildNode(t, backends[name], transport.ServerConfig{}, nil)
		servers[name] = srv
		registries[name] = open()
		if _, err := registries[name].Register(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	ring, err := registry.NewLocalRing(ctx, open(), registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer ring.Close()
	changes := ring.Changes(ctx)
	for ring.View().Len() < 2 {
		<-changes
	}
	c := transport.NewGuildClient(transport.ClientConfig{}, ring)
	defer c.Close()

	guild := snowflake.ID(1)
	for ; ; guild++ {
		if n, _ := ring.Owner(guild); n.Name == "guild-1" {
			break
		}
	}
	if err := c.Subscribe(ctx, guild, session); err != nil {
		t.Fatal(err)
	}
	backends["guild-1"].next(t)

	// Kill guild-1: its server and its registry client go at once.
	servers["guild-1"].Stop()
	registries["guild-1"].Close()
	start := time.Now()
	err = c.Subscribe(ctx, guild, session)
	if !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("Subscribe to a dead owner = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("failing took %s; the client should fail fast", d)
	}
	for {
		select {
		case ch := <-changes:
			if !ch.Moved(guild) {
				continue
			}
		case <-ctx.Done():
			t.Fatal("guild never moved off the dead node")
		}
		break
	}
	t.Logf("the ring moved guild %d %s after the kill", guild, time.Since(start))
	if n, _ := ring.Owner(guild); n.Name != "guild-2" {
		t.Fatalf("new owner %s", n.Name)
	}
	if err := c.Subscribe(ctx, guild, session); err != nil {
		t.Fatalf("Subscribe after the registry dropped the dead node = %v", err)
	}
	if got := backends["guild-2"].next(t); got.guildID != guild {
		t.Fatalf("guild-2 got %+v", got)
	}
}

func TestServerReportsHealth(t *testing.T) {
	g1 := newRecordingGuilds("guild-1")
	n1, srv := guildNode(t, g1, transport.ServerConfig{}, nil)
	conn, err := grpc.NewClient("passthrough:///"+n1.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	for _, svc := range []string{"", "concord.transport.v1.GuildNode"} {
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q = %v, %v", svc, resp, err)
		}
	}
	if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: "concord.transport.v1.GatewayNode"}); err == nil {
		t.Fatal("a guild-only server reports the gateway service")
	}
	srv.SetServing(false)
	resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health while draining = %v, %v", resp, err)
	}
}

func TestNewServerValidates(t *testing.T) {
	if _, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Gateway: newRecordingSink()}); !errors.Is(err, transport.ErrInvalid) {
		t.Fatalf("gateway server without a node name = %v", err)
	}
}
