package dev

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// concord dev builds every role of the table with the same Build function
// concord serve uses: in-process (no registry), its route on the one
// listener, its part run and its readiness folded into /readyz, and
// closed with the platform.
func TestDevBuildsTableRoles(t *testing.T) {
	var (
		closed  atomic.Int32
		running = make(chan struct{})
		ready   atomic.Bool
	)
	table := []wiring.Role{{Name: "echo", Build: func(ctx context.Context, b *wiring.Builder) error {
		if _, placed := wiring.Lookup(b.Seams, wiring.Placement); placed || b.Store == nil || b.Auth == nil || b.IDs == nil {
			t.Errorf("dev builder without the process's parts: %+v", b.Parts)
		}
		b.Handle("GET /echo/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "echo") }))
		return b.Add(lifecycle.Part{
			Name:  "loop",
			Run:   func(ctx context.Context) error { close(running); <-ctx.Done(); return nil },
			Ready: func() error { return map[bool]error{true: nil, false: errors.New("warming up")}[ready.Load()] },
			Close: func() error { closed.Add(1); return nil },
		})
	}}}

	p, addr := startDev(t, app.Tables{Chat: catalog.Chat, Table: table})
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the role's part did not run")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/echo/x"); code != http.StatusOK || body != "echo" {
		t.Fatalf("GET /echo/x = %d %q", code, body)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with a role warming up = %d, want 503", code)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz once every role is ready = %d", code)
	}
	if code, _ := get("/api/v10/nothing"); code != http.StatusNotFound {
		t.Fatalf("REST beside the role = %d", code)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if closed.Load() != 1 {
		t.Fatalf("role closed %d times", closed.Load())
	}
}

// The listener's connection metrics are on concord dev's /metrics.
func TestDevMetricsHaveListenerBounds(t *testing.T) {
	_, addr := startTestPlatform(t)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, name := range []string{"concord_http_connections_open "} {
		if !strings.Contains(string(b), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
