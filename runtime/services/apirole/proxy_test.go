package apirole

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd/etcdtest"
)

// joinGuild registers a guild node serving HTTP at addr and waits until
// the ring shows it.
func joinGuild(f *etcdtest.GuildRing, name, addr string) registry.Registration {
	return f.Join(registry.Node{Name: name, Addr: addr, HTTPAddr: addr})
}

// logSignal is a slog handler that signals each record whose message
// contains a substring.
type logSignal struct {
	match string
	ch    chan struct{}
}

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logSignal) WithGroup(string) slog.Handler      { return h }

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// echo is a guild node answering 200 with the request body, counting
// requests and remembering the retry header.
func echo(t *testing.T, served *atomic.Int32, retried *atomic.Bool) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.Header.Get(forwardedHeader) == "" {
			t.Errorf("request reached the guild node without %s", forwardedHeader)
		}
		if retried != nil && r.Header.Get(retryHeader) != "" {
			retried.Store(true)
		}
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, h http.Handler, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestProxyWaitsForRingOnDeadOwner: the owner refuses connections (it
// died, the registry still lists it); the proxy waits for the ring to
// change and sends the request, body included, to the new owner.
func TestProxyWaitsForRingOnDeadOwner(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	dead := joinGuild(f, "guild-a", closedAddr(t))
	var served atomic.Int32
	alive := echo(t, &served, nil)

	sig := &logSignal{match: "unreachable", ch: make(chan struct{}, 1)}
	p := newProxy(f.Ring, newResolver(nil), 10*time.Second, testMetrics(t), slog.New(sig))
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(t, p, "/api/v10/guilds/42/channels", `{"name":"x"}`) }()
	<-sig.ch // the dead owner was tried
	joinGuild(f, "guild-b", strings.TrimPrefix(alive.URL, "http://"))
	f.Leave("guild-a", dead)
	rec := <-done
	if rec.Code != http.StatusOK || rec.Body.String() != `{"name":"x"}` || served.Load() != 1 {
		t.Fatalf("got %d %q after %d requests served, want 200 with the body once", rec.Code, rec.Body, served.Load())
	}
}

// TestProxyNeverInventsSuccess: with the only owner dead and no ring
// change, the request ends in 503 after the bounded wait.
func TestProxyNeverInventsSuccess(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	joinGuild(f, "guild-a", closedAddr(t))
	p := newProxy(f.Ring, newResolver(nil), 300*time.Millisecond, testMetrics(t), slog.New(slog.DiscardHandler))
	start := time.Now()
	rec := post(t, p, "/api/v10/guilds/42/channels", `{}`)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("got %d %s, want 503", rec.Code, rec.Body)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the 300ms wait", d)
	}
}

// TestProxyDropsClientRetryHeader: a client's own X-Concord-Retry never
// reaches the guild node; only the proxy marks a send it retried.
func TestProxyDropsClientRetryHeader(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	var served atomic.Int32
	var retried atomic.Bool
	joinGuild(f, "guild-a", strings.TrimPrefix(echo(t, &served, &retried).URL, "http://"))
	p := newProxy(f.Ring, newResolver(nil), time.Second, testMetrics(t), slog.New(slog.DiscardHandler))
	req := httptest.NewRequest(http.MethodPost, "/api/v10/guilds/42/channels", strings.NewReader(`{}`))
	req.Header.Set(retryHeader, "1")
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || served.Load() != 1 {
		t.Fatalf("got %d after %d requests, want 200 after 1", rec.Code, served.Load())
	}
	if retried.Load() {
		t.Fatalf("the client's %s reached the guild node", retryHeader)
	}
}

// TestProxyRetriesNotOwner: a node that answers 503 + notOwnerHeader
// did not process the request; the proxy sends it again until the node
// takes it (its ring caught up), without a ring change on our side.
func TestProxyRetriesNotOwner(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	var calls atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set(notOwnerHeader, "guild-a")
			writeError(w, http.StatusServiceUnavailable, "not mine")
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	joinGuild(f, "guild-a", strings.TrimPrefix(s.URL, "http://"))
	p := newProxy(f.Ring, newResolver(nil), 5*time.Second, testMetrics(t), slog.New(slog.DiscardHandler))
	rec := post(t, p, "/api/v10/guilds/42/roles", `{"name":"r"}`)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"name":"r"}` || calls.Load() != 3 {
		t.Fatalf("got %d %q after %d calls, want 200 with the body after 3", rec.Code, rec.Body, calls.Load())
	}
}

// TestProxyRetriesOnceAfterLostResponse: the owner takes the request and
// dies without answering; the proxy retries once on the next owner,
// marking the request with retryHeader (it may have been applied).
func TestProxyRetriesOnceAfterLostResponse(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	dying := joinGuild(f, "guild-a", vanishingOwner(t))
	var served atomic.Int32
	var retried atomic.Bool
	next := echo(t, &served, &retried)

	sig := &logSignal{match: "lost mid-request", ch: make(chan struct{}, 1)}
	p := newProxy(f.Ring, newResolver(nil), 10*time.Second, testMetrics(t), slog.New(sig))
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(t, p, "/api/v10/guilds/42/channels", `{"n":1}`) }()
	<-sig.ch
	joinGuild(f, "guild-b", strings.TrimPrefix(next.URL, "http://"))
	f.Leave("guild-a", dying)
	rec := <-done
	if rec.Code != http.StatusOK || served.Load() != 1 || !retried.Load() {
		t.Fatalf("got %d after %d served (retry header %v), want 200 once with the retry header", rec.Code, served.Load(), retried.Load())
	}
}

func testMetrics(t *testing.T) *proxyMetrics {
	m, err := newProxyMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// vanishingOwner is a guild node that takes each request, reads the
// first chunk of it and vanishes without a response (it died
// mid-request); it returns its address.
func vanishingOwner(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 4096))
			c.Close()
		}
	}()
	return l.Addr().String()
}
