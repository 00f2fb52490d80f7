package transport_test

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// delivery is one batch a recordingSink received.
type delivery struct {
	node string
	b    event.Batch
}

// recordingSink is an event.Sink that hands every batch to a channel.
type recordingSink struct {
	ch chan delivery
}

func newRecordingSink() *recordingSink { return &recordingSink{ch: make(chan delivery, 1024)} }

func (s *recordingSink) Deliver(_ context.Context, node string, b event.Batch) {
	s.ch <- delivery{node, b}
}

// next waits for the next batch.
func (s *recordingSink) next(t *testing.T) delivery {
	t.Helper()
	select {
	case d := <-s.ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
		return delivery{}
	}
}

// none asserts nothing is waiting in the sink.
func (s *recordingSink) none(t *testing.T) {
	t.Helper()
	select {
	case d := <-s.ch:
		t.Fatalf("unexpected batch %+v", d)
	default:
	}
}

// staticDir is a Directory and Placement backed by maps.
type staticDir struct {
	mu     sync.Mutex
	nodes  map[string]registry.Node
	owners []string // successive Owner answers; the last one repeats
	calls  int
}

func (d *staticDir) set(n registry.Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nodes == nil {
		d.nodes = make(map[string]registry.Node)
	}
	d.nodes[n.Name] = n
}

func (d *staticDir) Node(name string) (registry.Node, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[name]
	return n, ok
}

func (d *staticDir) Owner(snowflake.ID) (registry.Node, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.owners) == 0 {
		return registry.Node{}, false
	}
	i := min(d.calls, len(d.owners)-1)
	d.calls++
	n, ok := d.nodes[d.owners[i]]
	return n, ok
}

// serve runs srv on a loopback port until the test ends.
func serve(t *testing.T, srv *transport.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// gatewayNode starts a gateway node's server delivering into a new sink.
func gatewayNode(t *testing.T, name string) (registry.Node, *recordingSink, *transport.Server) {
	t.Helper()
	sink := newRecordingSink()
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Node: name, Gateway: sink})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	return registry.Node{Name: name, Roles: []string{registry.RoleGateway}, Addr: addr}, sink, srv
}

// guildCall is one call a recordingGuilds received.
type guildCall struct {
	op      string
	guildID snowflake.ID
	session event.Session
	body    string
}

// recordingGuilds is a GuildBackend that records calls and answers from
// fields.
type recordingGuilds struct {
	name  string
	calls chan guildCall
	err   error
}

func newRecordingGuilds(name string) *recordingGuilds {
	return &recordingGuilds{name: name, calls: make(chan guildCall, 64)}
}

func (g *recordingGuilds) Subscribe(_ context.Context, id snowflake.ID, s event.Session) error {
	g.calls <- guildCall{op: "subscribe", guildID: id, session: s}
	return g.err
}

func (g *recordingGuilds) SubscribeMoved(_ context.Context, id snowflake.ID, s event.Session, refresh bool) error {
	op := "subscribe-moved"
	if refresh {
		op += "-refresh"
	}
	g.calls <- guildCall{op: op, guildID: id, session: s}
	return g.err
}

func (g *recordingGuilds) Disconnect(_ context.Context, id snowflake.ID, s event.Session) error {
	g.calls <- guildCall{op: "disconnect", guildID: id, session: s}
	return g.err
}

func (g *recordingGuilds) MoveSession(_ context.Context, id snowflake.ID, mv guild.Move) (int, error) {
	g.calls <- guildCall{op: "move", guildID: id, session: event.Session{ID: mv.Session, Node: mv.To}, body: mv.ID}
	return 3, g.err
}

func (g *recordingGuilds) CanView(_ context.Context, id, user, channel snowflake.ID) (bool, error) {
	g.calls <- guildCall{op: "canview", guildID: id, session: event.Session{UserID: user}, body: channel.String()}
	return channel%2 == 0, g.err
}

func (g *recordingGuilds) RoleMembers(_ context.Context, id, role snowflake.ID) ([]snowflake.ID, error) {
	g.calls <- guildCall{op: "rolemembers", guildID: id, body: role.String()}
	if g.err != nil {
		return nil, g.err
	}
	return []snowflake.ID{role + 1, role + 2}, nil
}

func (g *recordingGuilds) PresenceChanged(_ context.Context, id, user snowflake.ID, p presence.Presence) error {
	b, _ := json.Marshal(p)
	g.calls <- guildCall{op: "presence", guildID: id, session: event.Session{UserID: user}, body: string(b)}
	return g.err
}

func (g *recordingGuilds) LazyRequest(_ context.Context, id snowflake.ID, s event.Session, d json.RawMessage) error {
	g.calls <- guildCall{op: "op14", guildID: id, session: s, body: string(d)}
	return g.err
}

func (g *recordingGuilds) RequestMembers(_ context.Context, id snowflake.ID, s event.Session, d json.RawMessage) error {
	g.calls <- guildCall{op: "op8", guildID: id, session: s, body: string(d)}
	return g.err
}

func (g *recordingGuilds) UpdateVoiceState(_ context.Context, s event.Session, v guild.VoiceStateRequest) error {
	b, _ := json.Marshal(v)
	g.calls <- guildCall{op: "op4", guildID: v.GuildID, session: s, body: string(b)}
	return g.err
}

func (g *recordingGuilds) next(t *testing.T) guildCall {
	t.Helper()
	select {
	case c := <-g.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no call arrived", g.name)
		return guildCall{}
	}
}

func (g *recordingGuilds) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-g.calls:
		t.Fatalf("%s: unexpected call %+v", g.name, c)
	default:
	}
}

// guildNode starts a guild node's server over backend.
func guildNode(t *testing.T, backend *recordingGuilds, cfg transport.ServerConfig, owns func(snowflake.ID) bool) (registry.Node, *transport.Server) {
	t.Helper()
	srv, err := transport.NewServer(cfg, transport.Services{Node: backend.name, Guild: backend, Owns: owns})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	return registry.Node{Name: backend.name, Roles: []string{registry.RoleGuild}, Addr: addr}, srv
}
