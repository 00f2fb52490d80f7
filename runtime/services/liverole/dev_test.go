package liverole_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// TestContractOnConcordDev runs the live-comments contract against the
// platform `concord dev` runs, through its real listener: the /v1 routes
// beside the chat API, accounts and tokens from the chat API, the roles
// built from the role table on the embedded backends.
func TestContractOnConcordDev(t *testing.T) {
	livetest.Contract(t, func(t *testing.T, o livetest.Options) *livetest.Env {
		return startDev(t, o, t.TempDir())
	})
}

// TestDevRestartKeepsComments: comments, streams and the SSE snapshot
// outlive a restart of `concord dev` on the same data directory.
func TestDevRestartKeepsComments(t *testing.T) {
	dir := t.TempDir()
	o := livetest.TestOptions()
	e, stop := startDevStoppable(t, o, dir)
	alice, mallory := e.NewUser(), e.NewUser()
	s := e.CreateStream(alice, "restart")
	if r := e.Do("PUT", "/v1/streams/"+s.ID+"/bans/"+mallory.ID.String(), alice.Token, map[string]any{}); r.Status != 204 {
		t.Fatalf("ban = %d %s", r.Status, r.Body)
	}
	var posted []livetest.Comment
	for i := range 3 {
		posted = append(posted, e.Post(alice, s.ID, fmt.Sprintf("before restart %d", i), int64(i)))
		time.Sleep(2100 * time.Millisecond) // the per-user interval
	}
	// The archiver has them before the restart (scroll-back reads the store).
	e.Eventually(livetest.Wait, func() string {
		var got []livetest.Comment
		e.Do("GET", "/v1/streams/"+s.ID+"/comments?limit=10", "", nil).JSON(t, &got)
		if len(got) != 3 {
			return fmt.Sprintf("scroll-back has %d comments", len(got))
		}
		return ""
	})
	stop()
	e2, _ := startDevStoppable(t, o, dir)
	var st livetest.Stream
	if r := e2.Do("GET", "/v1/streams/"+s.ID, "", nil); r.Status != 200 {
		t.Fatalf("stream after restart = %d %s", r.Status, r.Body)
	} else {
		r.JSON(t, &st)
	}
	// The ban is kept too.
	if r := e2.Do("POST", "/v1/streams/"+s.ID+"/comments", mallory.Token, map[string]any{"text": "back again"}); r.Status != 403 {
		t.Fatalf("banned user's post after restart = %d %s", r.Status, r.Body)
	}
	v := livetest.Watch(t, e2.URL, s.ID, nil, "")
	v.Next(livetest.Wait, "state")
	snap := v.Comments(3, livetest.Wait)
	for i, c := range snap {
		if c.ID != posted[i].ID || c.Seq != posted[i].Seq {
			t.Fatalf("snapshot after restart [%d] = %+v, want %+v", i, c, posted[i])
		}
	}
	// New comments continue the stream's sequence.
	c := e2.Post(alice, s.ID, "after restart", 9)
	if c.Seq <= posted[2].Seq {
		t.Fatalf("seq after restart %d <= %d", c.Seq, posted[2].Seq)
	}
	if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
		t.Fatalf("live after restart = %+v", got[0])
	}
}

func startDev(t *testing.T, o livetest.Options, dir string) *livetest.Env {
	e, _ := startDevStoppable(t, o, dir)
	return e
}

// startDevStoppable runs the `concord dev` platform on dir and a real
// listener; stop shuts it down (also run at cleanup).
func startDevStoppable(t *testing.T, o livetest.Options, dir string) (*livetest.Env, func()) {
	t.Helper()
	_, e, stop := startDevNode(t, o, dir)
	return e, stop
}

// startDevNode is startDevStoppable with the process itself, whose seams
// a test reads.
func startDevNode(t *testing.T, o livetest.Options, dir string) (*app.Node, *livetest.Env, func()) {
	t.Helper()
	cfg := config.Default()
	cfg.Roles = app.DefaultTables().Names()
	cfg.DevUser = true
	cfg.DataDir = dir
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ShutdownTimeout = time.Second
	cfg.HTTP = "127.0.0.1:0"
	g := o.Gateway
	cfg.Live.PingInterval, cfg.Live.ReportInterval = g.PingInterval, g.ReportInterval
	cfg.Live.MaxPending, cfg.Live.FlushInterval = g.MaxPending, g.FlushInterval
	ctx, cancel := context.WithCancel(context.Background())
	cfg.HTTP = "127.0.0.1:0"
	p, err := app.Open(ctx, cfg, app.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	var once atomic.Bool
	stop := func() {
		if once.Swap(true) {
			return
		}
		cancel()
		<-served
		if err := p.Close(); err != nil {
			t.Errorf("close platform: %v", err)
		}
	}
	t.Cleanup(stop)
	url := "http://" + p.HTTPAddr()
	return p, livetest.Remote(t, url, livetest.RemoteRoles{NewUser: livetest.Register(url), Viewers: livetest.MetricViewers(url)}), stop
}

// TestShutdownSendsViewersAway: a process that stops drains its live
// gateway (lifecycle.Part.Drain, run by the graceful shutdown): a
// watching viewer is given a reconnection time within the drain spread,
// and its stream then ends, rather than every viewer being cut at once
// when the servers close.
func TestShutdownSendsViewersAway(t *testing.T) {
	e, stop := startDevStoppable(t, livetest.TestOptions(), t.TempDir())
	alice := e.NewUser()
	s := e.CreateStream(alice, "drained")
	ctx, cancel := context.WithTimeout(context.Background(), livetest.Wait)
	defer cancel()
	v, err := sse.Dial(ctx, nil, e.URL+"/v1/streams/"+s.ID+"/live", livetest.Auth(alice.Token, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if ev, err := v.Next(); err != nil || ev.Type != "state" {
		t.Fatalf("first event %v, %v; want the state", ev, err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stop()
	}()
	for {
		if _, err := v.Next(); err != nil {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the viewer's stream did not end within the wait")
	}
	if spread := 5000; v.Retry < 250 || v.Retry > spread {
		t.Fatalf("the stream ended with reconnection time %d ms, want one in [250, %d] from the drain", v.Retry, spread)
	}
	<-stopped
}
