package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/gatewayrole"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// concord serve builds the gateway role of catalog.Chat with the Build
// concord dev builds it with (TestDevBuildsGatewayRole in
// test/dev): with the registry, subscribing sessions on the
// guilds' owners over GuildNode, serving GatewayNode (Deliver and the
// session directory) and the drain among the node's admin endpoints.
func TestServeBuildsGatewayRole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node with an embedded etcd")
	}
	saved := catalog.Chat
	built := 0
	wrapped := make([]wiring.Role, 0, len(saved))
	for _, r := range saved {
		if r.Name != gatewayrole.Name {
			wrapped = append(wrapped, r)
			continue
		}
		wrapped = append(wrapped, wiring.Role{Name: r.Name, Build: func(ctx context.Context, b *wiring.Builder) error {
			if _, placed := wiring.Lookup(b.Seams, wiring.Placement); !placed || b.Registry == nil || b.GRPC == nil {
				t.Errorf("gateway role: serve builder with the wrong parts: %+v", b.Parts)
			}
			built++
			if err := r.Build(ctx, b); err != nil {
				return err
			}
			if b.GRPC.Gateway == nil || b.GRPC.Sessions == nil {
				t.Error("the gateway role serves no GatewayNode (Deliver, session directory)")
			}
			return nil
		}})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := Open(ctx, Config{Roles: DefaultRoles, Node: "solo", DataDir: t.TempDir(), AdminToken: "serve-admin-token",
		HTTP: "127.0.0.1:0", GRPC: "127.0.0.1:0", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}, Options{Tables: Tables{Chat: wrapped, Table: catalog.Table}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; n.Close() })
	if built != 1 {
		t.Fatalf("the gateway role was built %d times, want 1", built)
	}
	if gw, ok := wiring.Lookup(n.Seams(), gatewayrole.NodeKey); !ok || gw != n.Gateway() {
		t.Fatal("the node serves another gateway than the role's")
	}
	addr := n.HTTPAddr()
	waitReady(t, addr)

	var user struct {
		ID    snowflake.ID `json:"user_id,string"`
		Token string       `json:"token"`
	}
	resttest.Call(t, addr, "", "POST", "/auth/register", map[string]string{"username": "alice", "password": "alice password"}, &user)
	var g struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, user.Token, "POST", "/guilds", map[string]string{"name": "served"}, &g)

	c, err := gwtest.Dial(gwtest.URL(addr), user.Token, gwtest.Options{Name: "alice", Intents: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// READY, then GUILD_CREATE from the guild's owner over GuildNode and
	// GatewayNode.Deliver.
	if _, _, err := c.Next("READY", 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	f, _, err := c.Next("GUILD_CREATE", 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(f.D), g.ID) {
		t.Fatalf("GUILD_CREATE of another guild: %s", f.D)
	}

	// The session directory finds the session on this node.
	ring, err := wiring.Ring(ctx, n.Seams(), n.Registry(), registry.RoleGateway, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir := transport.NewSessionDirectory(transport.ClientConfig{}, wiring.RingRoster{LocalRing: ring})
	defer dir.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := dir.UserSessions(ctx, []snowflake.ID{user.ID})
		if err == nil && len(ss) == 1 && ss[0].Node == "solo" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session directory: %v %v, want alice's one session on solo", ss, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	req, _ := http.NewRequest("GET", "http://"+addr+"/admin/drain", nil)
	adminauth.Set(req, "serve-admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Draining bool  `json:"draining"`
		Sessions int64 `json:"sessions"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || st.Draining || st.Sessions != 1 {
		t.Fatalf("GET /admin/drain: %d %+v, want 200, not draining, 1 session", resp.StatusCode, st)
	}
}

// waitReady waits until the node at addr answers /readyz 200.
func waitReady(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
