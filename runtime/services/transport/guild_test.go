package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
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
	for _, refresh := range []bool{false, true} {
		if err := c.SubscribeMoved(ctx, 7, session, refresh); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "subscribe-moved", true: "subscribe-moved-refresh"}[refresh]
		if got := g1.next(t); got.op != want || got.guildID != 7 || got.session != session {
			t.Fatalf("SubscribeMoved(refresh %v) arrived as %+v", refresh, got)
		}
	}
	if err := c.Disconnect(ctx, 7, session); err != nil {
		t.Fatal(err)
	}
	if got := g1.next(t); got.op != "disconnect" || got.session != session {
		t.Fatalf("Disconnect arrived as %+v", got)
	}
	if n, err := c.MoveSession(ctx, 7, guild.Move{Session: "sess-1", To: "gw-b", ID: "mv-1"}); err != nil || n != 3 {
		t.Fatalf("MoveSession = %d, %v", n, err)
	}
	if got := g1.next(t); got.op != "move" || got.guildID != 7 || got.session.ID != "sess-1" || got.session.Node != "gw-b" || got.body != "mv-1" {
		t.Fatalf("MoveSession arrived as %+v", got)
	}
	for _, ch := range []snowflake.ID{10, 11} {
		ok, err := c.CanView(ctx, 7, 42, ch)
		if err != nil || ok != (ch%2 == 0) {
			t.Fatalf("CanView(channel %d) = %v, %v", ch, ok, err)
		}
		if got := g1.next(t); got.op != "canview" || got.session.UserID != 42 || got.body != ch.String() {
			t.Fatalf("CanView arrived as %+v", got)
		}
	}
	if ids, err := c.RoleMembers(ctx, 7, 100); err != nil || !slices.Equal(ids, []snowflake.ID{101, 102}) {
		t.Fatalf("RoleMembers = %v, %v", ids, err)
	}
	if got := g1.next(t); got.op != "rolemembers" || got.body != "100" {
		t.Fatalf("RoleMembers arrived as %+v", got)
	}
	p := presence.Presence{Status: presence.Idle, Activities: []presence.Activity{{Name: "chess", Type: 0}},
		ClientStatus: presence.ClientStatus{Desktop: presence.Idle, Web: presence.Online}}
	if err := c.PresenceChanged(ctx, 7, 42, p); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(p)
	if got := g1.next(t); got.op != "presence" || got.session.UserID != 42 || got.body != string(want) {
		t.Fatalf("PresenceChanged arrived as %+v, want %s", got, want)
	}
	d := json.RawMessage(`{"guild_id":"7","channels":{"8":[[0,99]]}}`)
	if err := c.LazyRequest(ctx, 7, session, d); err != nil {
		t.Fatal(err)
	}
	if got := g1.next(t); got.op != "op14" || got.session != session || got.body != string(d) {
		t.Fatalf("LazyRequest arrived as %+v", got)
	}
	if err := c.RequestMembers(ctx, 7, session, d); err != nil {
		t.Fatal(err)
	}
	if got := g1.next(t); got.op != "op8" || got.session != session || got.body != string(d) {
		t.Fatalf("RequestMembers arrived as %+v", got)
	}
	v := guild.VoiceStateRequest{GuildID: 7, ChannelID: 9, SelfMute: true}
	if err := c.UpdateVoiceState(ctx, session, v); err != nil {
		t.Fatal(err)
	}
	want, _ = json.Marshal(v)
	if got := g1.next(t); got.op != "op4" || got.guildID != 7 || got.session != session || got.body != string(want) {
		t.Fatalf("UpdateVoiceState arrived as %+v, want %s", got, want)
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
}

// TestTypedGuildCallErrors checks every typed GuildNode RPC: a domain
// error of the backend comes back as the same sentinel (so callers decide
// as they did in-process), a malformed request is refused before the
// backend, and a guild the node does not own is ErrNotOwner.
func TestTypedGuildCallErrors(t *testing.T) {
	errNotSubscribed := errors.New("guild: session not subscribed")
	errUnknownGuild := errors.New("guild: unknown guild")
	table := []transport.ErrorCode{{Err: errNotSubscribed, Code: codes.NotFound}, {Err: errUnknownGuild, Code: codes.NotFound}}
	g1 := newRecordingGuilds("guild-1")
	owned := func(id snowflake.ID) bool { return id != 13 }
	n1, _ := guildNode(t, g1, transport.ServerConfig{Errors: table}, owned)
	dir := &staticDir{owners: []string{"guild-1"}}
	dir.set(n1)
	c := transport.NewGuildClient(transport.ClientConfig{Errors: table}, dir)
	defer c.Close()
	ctx := context.Background()
	mv := guild.Move{Session: "sess-1", To: "gw-b", ID: "mv-1"}
	d := json.RawMessage(`{}`)
	calls := map[string]func(guildID snowflake.ID) error{
		"MoveSession": func(g snowflake.ID) error { _, err := c.MoveSession(ctx, g, mv); return err },
		"CanView":     func(g snowflake.ID) error { _, err := c.CanView(ctx, g, 42, 10); return err },
		"RoleMembers": func(g snowflake.ID) error { _, err := c.RoleMembers(ctx, g, 100); return err },
		"PresenceChanged": func(g snowflake.ID) error {
			return c.PresenceChanged(ctx, g, 42, presence.OfflinePresence())
		},
		"LazyRequest":    func(g snowflake.ID) error { return c.LazyRequest(ctx, g, session, d) },
		"RequestMembers": func(g snowflake.ID) error { return c.RequestMembers(ctx, g, session, d) },
		"UpdateVoiceState": func(g snowflake.ID) error {
			return c.UpdateVoiceState(ctx, session, guild.VoiceStateRequest{GuildID: g})
		},
	}
	for name, call := range calls {
		for _, domain := range []error{errNotSubscribed, errUnknownGuild, transport.ErrNotServed} {
			g1.err = fmt.Errorf("serving: %w", domain)
			err := call(9)
			if !errors.Is(err, domain) {
				t.Errorf("%s: backend error %v came back as %v", name, domain, err)
			}
			if errors.Is(err, transport.ErrUnavailable) {
				t.Errorf("%s: a domain error looks like an unavailable node: %v", name, err)
			}
			g1.next(t)
		}
		g1.err = nil
		if err := call(13); !errors.Is(err, transport.ErrNotOwner) {
			t.Errorf("%s on a guild the node does not own = %v, want ErrNotOwner", name, err)
		}
		if err := call(0); !errors.Is(err, transport.ErrInvalid) {
			t.Errorf("%s on guild 0 = %v, want ErrInvalid", name, err)
		}
		g1.none(t)
	}
	// Arguments the server refuses before the backend.
	bad := map[string]error{}
	_, bad["MoveSession without a move id"] = c.MoveSession(ctx, 9, guild.Move{Session: "s", To: "gw-b"})
	_, bad["CanView without a channel"] = c.CanView(ctx, 9, 42, 0)
	_, bad["RoleMembers without a role"] = c.RoleMembers(ctx, 9, 0)
	bad["PresenceChanged without a user"] = c.PresenceChanged(ctx, 9, 0, presence.OfflinePresence())
	bad["LazyRequest without a session"] = c.LazyRequest(ctx, 9, event.Session{}, d)
	bad["UpdateVoiceState without a session"] = c.UpdateVoiceState(ctx, event.Session{}, guild.VoiceStateRequest{GuildID: 9})
	for what, err := range bad {
		if !errors.Is(err, transport.ErrInvalid) {
			t.Errorf("%s = %v, want ErrInvalid", what, err)
		}
	}
	g1.none(t)
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
