package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
)

// serving starts an HTTP server on a loopback listener; served receives
// what its Serve returned.
func serving(t *testing.T) (srv *http.Server, url string, served chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv = &http.Server{Handler: named("ok"), ReadHeaderTimeout: 10 * time.Second}
	served = make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, "http://" + l.Addr().String() + "/", served
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func get(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// The end of ctx: not ready, Leave while the servers still serve, then
// the admin server and the HTTP server shut down; no error.
func TestServeShutsDownInOrder(t *testing.T) {
	p := NewProcess(nil)
	srv, url, served := serving(t)
	admin, adminURL, adminServed := serving(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	notReady, left := false, false
	err := p.Serve(ctx, Serving{
		Server: srv, Admin: admin, Errc: make(chan error), Timeout: 30 * time.Second,
		Logger:   discardLogger(),
		NotReady: func() { notReady = true },
		Leave: func(context.Context) {
			left = true
			if !notReady {
				t.Error("Leave ran before NotReady")
			}
			if err := get(url); err != nil {
				t.Errorf("the HTTP server was shut down before Leave: %v", err)
			}
			if err := get(adminURL); err != nil {
				t.Errorf("the admin server was shut down before Leave: %v", err)
			}
		},
	})
	if err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
	if !left {
		t.Error("Leave did not run")
	}
	for name, c := range map[string]chan error{"http": served, "admin": adminServed} {
		if err := <-c; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("%s server's Serve = %v, want ErrServerClosed", name, err)
		}
	}
}

// A Stop fires: with Abort, Serve returns its Err at once and the server
// keeps serving (no drain); without, it shuts down and then reports it.
func TestServeStops(t *testing.T) {
	lost := errors.New("claim lost")
	for _, abort := range []bool{true, false} {
		p := NewProcess(nil)
		srv, url, served := serving(t)
		c := make(chan struct{})
		close(c)
		aborted, left := false, false
		s := Serving{
			Server: srv, Errc: make(chan error), Timeout: 30 * time.Second, Logger: discardLogger(),
			Stops: []Stop{{C: c, Err: lost}},
			Leave: func(context.Context) { left = true },
		}
		if abort {
			s.Abort = func() { aborted = true }
		}
		if err := p.Serve(context.Background(), s); !errors.Is(err, lost) {
			t.Fatalf("abort=%v: Serve = %v, want %v", abort, err, lost)
		}
		if abort {
			if !aborted || left {
				t.Errorf("abort: Abort ran %v, Leave ran %v; want only Abort", aborted, left)
			}
			if err := get(url); err != nil {
				t.Errorf("abort: the server stopped serving: %v", err)
			}
			continue
		}
		if !left {
			t.Error("Leave did not run")
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve of the server = %v, want ErrServerClosed", err)
		}
	}
}

// A failed part stops the process like a Stop; a server error is
// returned at once, the process still ready.
func TestServeFailures(t *testing.T) {
	p := NewProcess(nil)
	boom := errors.New("boom")
	if err := p.Group.Add(lifecycle.Part{Name: "broken", Run: func(context.Context) error { return boom }}); err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background())
	defer func() { _ = p.Stop(context.Background()) }()
	srv, _, _ := serving(t)
	if err := p.Serve(context.Background(), Serving{Server: srv, Errc: make(chan error), Timeout: 30 * time.Second, Logger: discardLogger()}); !errors.Is(err, boom) {
		t.Fatalf("Serve = %v, want %v", err, boom)
	}

	srv2, _, _ := serving(t)
	errc := make(chan error, 1)
	errc <- boom
	notReady := false
	err := NewProcess(nil).Serve(context.Background(), Serving{Server: srv2, Errc: errc, Timeout: 30 * time.Second, Logger: discardLogger(),
		NotReady: func() { notReady = true }})
	if !errors.Is(err, boom) || notReady {
		t.Fatalf("Serve = %v (not ready %v), want serve: %v, still ready", err, notReady, boom)
	}
}
