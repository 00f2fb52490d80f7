package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// named answers with its name, so a test sees which handler served.
type named string

func (n named) ServeHTTP(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(n)) }

// The one route table: the roles' routes first, a WebSocket upgrade
// anywhere else to the gateway, GET outside the server's paths to the web
// client, other requests to the REST handler, the probes, and the roles'
// admin endpoints under /admin/ only with the admin token.
func TestRoutes(t *testing.T) {
	p := NewProcess(nil)
	p.Mux.Handle("/api/", named("rest-role"))
	p.Admin.Handle("/admin/drain", named("role-admin"))
	p.Admin.Handle("GET /admin/guilds", named("guild-admin"))
	ready := false
	h := Routes{
		Process:    p,
		Metrics:    prometheus.NewRegistry(),
		Ready:      func() bool { return ready },
		AdminToken: "secret",
		Gateway:    named("gateway"),
		REST:       named("rest-fallback"),
	}.Handler()
	do := func(method, path string, hdr map[string]string) (int, string) {
		req := httptest.NewRequest(method, path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"}
	admin := map[string]string{"Authorization": "Bearer secret"}
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
		code         int
		body         string
	}{
		{"GET", "/api/v10/users/@me", nil, 200, "rest-role"},
		{"GET", "/", upgrade, 200, "gateway"},
		{"GET", "/?v=10&encoding=json", upgrade, 200, "gateway"},
		{"POST", "/nothing", nil, 200, "rest-fallback"},
		{"GET", "/healthz", nil, 200, "ok\n"},
		{"GET", "/readyz", nil, 503, "not ready\n"},
		{"GET", "/admin/guilds", nil, 401, ""},
		{"GET", "/admin/guilds", admin, 200, "guild-admin"},
		{"POST", "/admin/drain", admin, 200, "role-admin"},
	} {
		code, body := do(c.method, c.path, c.hdr)
		if code != c.code || (c.body != "" && body != c.body) {
			t.Errorf("%s %s = %d %q, want %d %q", c.method, c.path, code, body, c.code, c.body)
		}
	}
	if code, body := do("GET", "/channels/1", nil); code != 200 || strings.Contains(body, "rest-fallback") {
		t.Errorf("GET /channels/1 = %d %q, want the web client", code, body)
	}
	ready = true
	if code, _ := do("GET", "/readyz", nil); code != 200 {
		t.Errorf("/readyz = %d once ready", code)
	}
	if code, _ := do("GET", "/metrics", nil); code != 200 {
		t.Errorf("/metrics = %d", code)
	}
}

// Without a REST handler a request no route serves gets Discord's JSON
// 404, and without a gateway an upgrade is no different.
func TestRoutesWithoutRoles(t *testing.T) {
	h := Routes{Process: NewProcess(nil), Metrics: prometheus.NewRegistry(), Ready: func() bool { return true }}.Handler()
	req := httptest.NewRequest("POST", "/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"message"`) {
		t.Fatalf("POST / = %d %s, want a JSON 404", rec.Code, rec.Body)
	}
}

// One Build pass builds the chat roles then the table roles that want
// names; Stop stops their parts in reverse, then runs the process's
// closers, then closes the seams.
func TestProcessBuildAndStop(t *testing.T) {
	var order []string
	record := func(s string) func() error { return func() error { order = append(order, s); return nil } }
	seamKey := wiring.Key[int]{Name: "test/seam"}
	mk := func(name string) wiring.Role {
		return wiring.Role{Name: name, Build: func(ctx context.Context, b *wiring.Builder) error {
			order = append(order, "build "+name)
			_, err := wiring.Shared(b.Seams, seamKey, func() (int, func() error, error) { return 1, record("seams"), nil })
			if err != nil {
				return err
			}
			return b.Add(lifecycle.Part{Name: "part", Close: record("stop " + name)})
		}}
	}
	p := NewProcess(nil)
	want := func(name string) bool { return name == "chat" || name == "table" }
	if _, err := p.Build(context.Background(), Tables{Chat: []wiring.Role{mk("chat"), mk("skipped")}, Table: []wiring.Role{mk("table")}}, want, wiring.Parts{}); err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background())
	if err := p.Ready(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(context.Background(), record("closer")); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(order, ", ")
	if w := "build chat, build table, stop table, stop chat, closer, seams"; got != w {
		t.Fatalf("order %q, want %q", got, w)
	}
	other := NewProcess(nil)
	if _, err := other.Build(context.Background(), Tables{}, want, wiring.Parts{Seams: &wiring.Seams{}}); err == nil {
		t.Fatal("Build accepted parts with another process's seams")
	}
}
