package dev

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/gatewayrole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// concord dev builds the gateway role of catalog.Chat with the Build
// concord serve builds it with (TestServeBuildsGatewayRole in
// runtime/app): in process, after the guild role, whose events reach
// the role's node through the process's sink (wiring.Sink); the node serves /gateway
// and the root path's upgrade, and its drain is among the admin
// endpoints, behind the admin token.
func TestDevBuildsGatewayRole(t *testing.T) {
	saved := catalog.Chat
	var built int
	wrapped := make([]wiring.Role, 0, len(saved))
	for _, r := range saved {
		if r.Name != gatewayrole.Name {
			wrapped = append(wrapped, r)
			continue
		}
		wrapped = append(wrapped, wiring.Role{Name: r.Name, Build: func(ctx context.Context, b *wiring.Builder) error {
			if _, placed := wiring.Lookup(b.Seams, wiring.Placement); placed || b.GRPC != nil {
				t.Errorf("gateway role: dev builder with the wrong parts: %+v", b.Parts)
			}
			if _, ok := wiring.Lookup(b.Seams, gatewayrole.NodeKey); ok {
				t.Error("a gateway node before the gateway role was built")
			}
			built++
			return r.Build(ctx, b)
		}})
	}

	const token = "gateway-role-admin-token"
	p, addr := startDev(t, app.Tables{Chat: wrapped, Table: catalog.Table}, func(c *config.Config) { c.AdminToken = token })
	if built != 1 {
		t.Fatalf("the gateway role was built %d times, want 1", built)
	}
	if n, ok := wiring.Lookup(p.Seams(), gatewayrole.NodeKey); !ok || n != p.Gateway() {
		t.Fatalf("the gateway seam of concord dev = %p, %v; the platform serves %p", n, ok, p.Gateway())
	}

	alice, bob, g, ch := guildOfTwo(t, addr, "gateway role")
	a := dialAs(t, addr, "alice", alice.Token, "linux", nil)
	a.until("GUILD_CREATE", func(d json.RawMessage) bool { return strings.Contains(string(d), `"id":"`+g.ID+`"`) })
	// discord.py's default URL: the root path upgrades to the same node.
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/?v=10&encoding=json", nil)
	if err != nil {
		t.Fatalf("dial the root path: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	rootHello := readOp(t, c)
	if rootHello != 10 {
		t.Fatalf("root path: first op %d, want HELLO (10)", rootHello)
	}
	if got := p.Gateway().Sessions(); got != 1 {
		t.Fatalf("sessions on the role's node: %d, want 1 (alice)", got)
	}
	// A message fans out from the guild role's actor to the role's node.
	resttest.Call(t, addr, bob.Token, "POST", "/channels/"+ch.ID+"/messages", map[string]any{"content": "through the role"}, nil)
	a.until("MESSAGE_CREATE", func(d json.RawMessage) bool { return strings.Contains(string(d), "through the role") })

	admin := func(method, tok string) (int, map[string]any) {
		req, _ := http.NewRequest(method, "http://"+addr+"/admin/drain", nil)
		if tok != "" {
			adminauth.Set(req, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return resp.StatusCode, st
	}
	if code, _ := admin("POST", ""); code != http.StatusUnauthorized {
		t.Fatalf("POST /admin/drain without the token: %d, want 401", code)
	}
	if code, st := admin("GET", token); code != http.StatusOK || st["draining"] != false {
		t.Fatalf("GET /admin/drain before a drain: %d %v", code, st)
	}
	if code, st := admin("POST", token); code != http.StatusOK || st["draining"] != true {
		t.Fatalf("POST /admin/drain: %d %v, want 200 draining", code, st)
	}
	// The drain sends alice op 7 and takes the process out of rotation.
	if err := a.Await("op 7 after the drain", 30*time.Second, func([]gwtest.Frame) bool { return a.Ops(7) > 0 }); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining: %d, want 503", resp.StatusCode)
	}
}

// readOp reads one frame from c and returns its op.
func readOp(t *testing.T, c *websocket.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var f struct {
		Op int `json:"op"`
	}
	if err := c.ReadJSON(&f); err != nil {
		t.Fatalf("read a frame: %v", err)
	}
	return f.Op
}
