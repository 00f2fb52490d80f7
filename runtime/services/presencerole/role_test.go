package presencerole

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/guildrole"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/runtime/services/wiring/wiringtest"
)

// discard is a sink that drops every batch.
type discard struct{}

func (discard) Deliver(context.Context, string, event.Batch) {}

// started returns a session and the ClientInfo of its IDENTIFY with
// status.
func started(user snowflake.ID, status string) (event.Session, gateway.ClientInfo) {
	s := event.Session{ID: event.SessionID("s-" + status), UserID: user, Node: "node-1"}
	return s, gateway.ClientInfo{OS: "linux", Presence: []byte(`{"status":"` + status + `","since":0,"activities":[],"afk":false}`)}
}

// TestDevBuild: in `concord dev` the role refuses to build without the
// process's guild service; with it (the guild role built first, as in
// roles.Chat), it provides the gateway side (GatewayKey: op 3, 8 and 14,
// no resync: the service is in process) on its in-process service
// (LocalKey); a restart
// swaps the service the gateway side reports to.
func TestDevBuild(t *testing.T) {
	ctx := context.Background()
	var group lifecycle.Group
	var none wiring.Seams
	err := wiring.Build(ctx, []wiring.Role{Role}, func(string) bool { return true }, wiringtest.Parts(t, &none, config.Default()), http.NewServeMux(), &group)
	if err == nil || !strings.Contains(err.Error(), "no guild service") {
		t.Fatalf("build without a guild service = %v, want the missing service named", err)
	}

	var seams wiring.Seams
	t.Cleanup(func() { seams.Close() })
	wiring.Provide[event.Sink](&seams, wiring.Sink, discard{})
	cfg := config.Default()
	cfg.Presence.TickInterval = -1
	p := wiringtest.Parts(t, &seams, cfg)
	if err := wiring.Build(ctx, []wiring.Role{guildrole.Role, Role}, func(string) bool { return true }, p, http.NewServeMux(), &group); err != nil {
		t.Fatal(err)
	}
	side, ok := wiring.Lookup(&seams, GatewayKey)
	if !ok || side.Presence == nil {
		t.Fatal("the role provided no gateway side")
	}
	if side.Resync != nil || side.ReportInterval != p.Config.Presence.ReportInterval {
		t.Fatalf("dev gateway side: resync %v, report interval %v", side.Resync != nil, side.ReportInterval)
	}
	ops := side.Presence.OpHandlers()
	for _, op := range []int{gateway.OpPresenceUpdate, gateway.OpRequestGuildMembers, gateway.OpLazyRequest} {
		if ops[op] == nil {
			t.Fatalf("the gateway side has no op %d handler", op)
		}
	}
	local, ok := wiring.Lookup(&seams, LocalKey)
	if !ok || local == nil {
		t.Fatal("the role provided no in-process service")
	}
	user := snowflake.ID(42)
	s, info := started(user, "dnd")
	side.Presence.SessionStarted(ctx, s, info)
	if n := local.Service().Sessions(); n != 1 {
		t.Fatalf("the service knows %d sessions after one started, want 1", n)
	}
	if got := local.Get(user).Status; got != presence.DND {
		t.Fatalf("presence of the started session's user = %s, want dnd", got)
	}
	fresh, err := local.Restart(0)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Sessions() != 0 || local.Service() != fresh {
		t.Fatal("a restarted service is not fresh or not current")
	}
	side.Presence.Report(ctx, s.Node, []event.Session{s})
	if fresh.Sessions() != 1 || local.Get(user).Status != presence.DND {
		t.Fatalf("the re-report did not rebuild the fresh service: %d sessions, %s", fresh.Sessions(), local.Get(user).Status)
	}
}

// TestJoins: a `concord serve` node builds the role when it runs the
// presence role or a gateway with presence on, and not otherwise.
func TestJoins(t *testing.T) {
	for _, c := range []struct {
		roles    []string
		presence bool
		want     bool
	}{
		{[]string{Name}, false, true},
		{[]string{"gateway"}, true, true},
		{[]string{"gateway"}, false, false},
		{[]string{"guild"}, true, false},
		{[]string{"api", "guild"}, false, false},
	} {
		cfg := config.Config{Roles: c.roles}
		cfg.Presence.Enabled = c.presence
		if got := Joins(cfg); got != c.want {
			t.Errorf("Joins(roles %v, presence %v) = %v, want %v", c.roles, c.presence, got, c.want)
		}
	}
}

// TestServeBuild: in `concord serve` a node running the presence role and
// a gateway with --presence serves PresenceNode for the users it owns on
// the presence ring (refusing the others with ErrNotOwner) and gives its
// gateway the ring-sharded side, in process for the users it owns, with
// a resync on ring changes; a gateway node with --presence alone gets the
// gateway side and serves no PresenceNode.
func TestServeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded etcd")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop, endpoint, err := etcdreg.StartEmbedded(ctx, filepath.Join(t.TempDir(), "etcd"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	newReg := func() registry.Registry {
		reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{endpoint}, LeaseTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		return reg
	}
	build := func(node string, roles ...string) (*wiring.Seams, *transport.Services, *lifecycle.Group) {
		seams, group := &wiring.Seams{}, &lifecycle.Group{}
		cfg := config.Default()
		cfg.Node, cfg.Roles = node, roles
		cfg.Presence.Enabled = true
		p := wiringtest.Parts(t, seams, cfg)
		p.Registry, p.GRPC = newReg(), &transport.Services{Node: node}
		p.ClientConfig = transport.ClientConfig{CallTimeout: 5 * time.Second}
		wiringtest.Remote(t, ctx, p)
		if err := wiring.Build(ctx, []wiring.Role{Role}, func(string) bool { return true }, p, http.NewServeMux(), group); err != nil {
			t.Fatal(err)
		}
		group.Start(ctx)
		t.Cleanup(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer scancel()
			group.Stop(sctx)
			seams.Close()
		})
		return seams, p.GRPC, group
	}

	seams, svc, _ := build("ps-1", Name, "gateway")
	if svc.Presence == nil {
		t.Fatal("the presence role serves no PresenceNode")
	}
	side, ok := wiring.Lookup(seams, GatewayKey)
	if !ok || side.Presence == nil || side.Resync == nil {
		t.Fatal("a gateway node with --presence has no gateway side with a resync")
	}
	ring, ok := wiring.Lookup(seams, wiring.RingKey(Name))
	if !ok {
		t.Fatal("the role opened no presence ring")
	}
	reg := newReg()
	if _, err := reg.Register(ctx, registry.Node{Name: "ps-1", Roles: []string{Name}, Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ring.View().Len() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("ps-1 never joined its presence ring")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The gateway side reports a session of a user ps-1 owns in process:
	// no gRPC listener serves ps-1 here.
	local := svc.Presence.(*ownedPresence)
	s, info := started(7, "idle")
	side.Presence.SessionStarted(ctx, s, info)
	if local.svc.Sessions() != 1 || local.svc.Get(7).Status != presence.Idle {
		t.Fatalf("the owned service knows %d sessions (user 7 %s) after a local start, want 1, idle", local.svc.Sessions(), local.svc.Get(7).Status)
	}

	// A second presence node takes a share of the users: ps-1 refuses
	// theirs.
	if _, err := reg.Register(ctx, registry.Node{Name: "ps-2", Roles: []string{Name}, Addr: "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	for ring.View().Len() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("ps-2 never joined the presence ring")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var other snowflake.ID
	for u := snowflake.ID(1); other == 0; u++ {
		if n, _ := ring.Owner(u); n.Name == "ps-2" {
			other = u
		}
	}
	err = svc.Presence.Connect(ctx, presence.SessionState{Session: "s-other", UserID: other, Node: "gw", Status: presence.Online})
	if !errors.Is(err, transport.ErrNotOwner) {
		t.Fatalf("PresenceNode.Connect of a user ps-2 owns = %v, want ErrNotOwner", err)
	}

	gwSeams, gwSvc, _ := build("gw-1", "gateway")
	if gwSvc.Presence != nil {
		t.Fatal("a gateway-only node serves PresenceNode")
	}
	if side, ok := wiring.Lookup(gwSeams, GatewayKey); !ok || side.Presence == nil || side.Resync == nil {
		t.Fatal("a gateway-only node with --presence has no gateway side")
	}
	if _, ok := wiring.Lookup(gwSeams, LocalKey); ok {
		t.Fatal("a serve node provides dev's in-process service")
	}
}
