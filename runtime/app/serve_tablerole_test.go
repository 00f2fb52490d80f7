package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// A table role is built once from the node's configuration, serves its
// route on the node's HTTP listener, runs its part while the node serves,
// holds /readyz at 503 while its part is not ready, and is closed when
// the node closes.
func TestTableRole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node with an embedded etcd")
	}
	var (
		built, closed atomic.Int32
		running       = make(chan struct{})
		ready         atomic.Bool
	)
	table := []wiring.Role{{Name: "echo", Build: func(ctx context.Context, b *wiring.Builder) error {
		built.Add(1)
		if b.Config.Node != "solo" || b.Store == nil || b.Registry == nil {
			t.Errorf("builder without the node's parts: %+v", b)
		}
		b.Handle("GET /echo/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "echo") }))
		return b.Add(lifecycle.Part{
			Name:  "loop",
			Run:   func(ctx context.Context) error { close(running); <-ctx.Done(); return nil },
			Ready: func() error { return map[bool]error{true: nil, false: errors.New("warming up")}[ready.Load()] },
			Close: func() error { closed.Add(1); return nil },
		})
	}}}

	ctx, cancel := context.WithCancel(context.Background())
	n, err := Open(ctx, Config{Roles: append(append([]string{}, DefaultRoles...), "echo"), Node: "solo", DataDir: t.TempDir(),
		HTTP: "127.0.0.1:0", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}, Options{Tables: Tables{Chat: catalog.Chat, Table: table}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the role's part did not run")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + n.HTTPAddr() + path)
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
		t.Fatalf("/readyz with a part warming up = %d, want 503", code)
	}
	ready.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for code, _ := get("/readyz"); code != http.StatusOK; code, _ = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d once every part is ready", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if built.Load() != 1 || closed.Load() != 1 {
		t.Fatalf("built %d closed %d, want 1 and 1", built.Load(), closed.Load())
	}
}
