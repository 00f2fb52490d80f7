package livetest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/placement"
	"github.com/concord-chat/concord/runtime/domain/live/recent"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// countingCache counts the recent cache's reads.
type countingCache struct {
	*recent.Mem
	ranges atomic.Int64
}

func (c *countingCache) Range(ctx context.Context, stream snowflake.ID, after, before int64, n int) ([]live.Event, error) {
	c.ranges.Add(1)
	return c.Mem.Range(ctx, stream, after, before, n)
}

// resumer is a viewer that reconnects through the edge with the
// Last-Event-ID of the last event it read whenever its stream ends, as a
// browser's EventSource does: after the reconnection time the server
// last set (retry:), else at once.
type resumer struct {
	url, token string
	mu         sync.Mutex
	seqs       []int64
	lastID     string
	reconnects int
	retries    []int         // the reconnection times (ms) it was given
	back       chan struct{} // a reconnect opened
}

func (r *resumer) run(ctx context.Context) {
	retry := 0
	for ctx.Err() == nil {
		r.mu.Lock()
		h := livetest.Auth(r.token, r.lastID)
		r.mu.Unlock()
		s, err := sse.Dial(ctx, nil, r.url, h)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond): // EventSource's retry
			}
			continue
		}
		r.mu.Lock()
		reopened := r.lastID != ""
		r.mu.Unlock()
		if reopened {
			r.back <- struct{}{}
		}
		s.Retry = retry
		for {
			ev, err := s.Next()
			if err != nil {
				break
			}
			r.mu.Lock()
			if ev.ID != "" {
				r.lastID = ev.ID
			}
			if ev.Type == "comment" {
				n, _ := strconv.ParseInt(ev.ID, 10, 64)
				r.seqs = append(r.seqs, n)
			}
			r.mu.Unlock()
		}
		s.Close()
		r.mu.Lock()
		r.reconnects++
		if s.Retry != retry {
			retry = s.Retry
			r.retries = append(r.retries, retry)
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(retry) * time.Millisecond):
		}
	}
}

func (r *resumer) shown() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seqs...)
}

// twoWide is a stream two gateways wide (its creator pre-set) of three,
// behind an edge, with its viewers connected.
type twoWide struct {
	e       *livetest.Env
	cache   *countingCache
	gws     []livetest.ExtraGateway
	targets []placement.Gateway
	edge    *placement.Edge
	creator livetest.User
	s       livetest.Stream
	rs      []*resumer
	posted  []livetest.Comment
}

func startTwoWide(t *testing.T, ctx context.Context, viewers int, cfg gateway.Config) *twoWide {
	w := &twoWide{cache: &countingCache{Mem: recent.New()}}
	w.e = livetest.Start(t, livetest.Backends{Cache: w.cache}, livetest.Options{})
	e := w.e
	for i := range 3 {
		cfg.Name, cfg.ReportInterval = fmt.Sprintf("gw-%d", i), 100*time.Millisecond
		g := e.StartGateway(cfg)
		w.gws = append(w.gws, g)
		w.targets = append(w.targets, placement.Gateway{Name: cfg.Name, Addr: strings.TrimPrefix(g.URL, "http://")})
	}
	dir := placement.NewDirectory(e.B.Board, placement.DirectoryConfig{})
	w.edge = placement.NewEdge(placement.NewPlacer(dir, placement.PlacerConfig{}), placement.EdgeConfig{Logger: slog.New(slog.DiscardHandler)})
	w.edge.SetGateways(w.targets)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/streams/{id}/live", w.edge)
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)

	w.creator = e.NewUser()
	if err := placement.SetWidth(ctx, e.B.Board, w.creator.ID, 2); err != nil {
		t.Fatal(err)
	}
	w.s = e.CreateStream(w.creator, "two wide")
	e.Eventually(livetest.Wait, func() string {
		dir.Refresh(ctx)
		if dir.Width(w.s.ID) != 2 {
			return "width not 2 yet"
		}
		return ""
	})
	w.rs = make([]*resumer, viewers)
	for i := range w.rs {
		w.rs[i] = &resumer{url: front.URL + "/v1/streams/" + w.s.ID + "/live", back: make(chan struct{}, 4)}
		go w.rs[i].run(ctx)
	}
	w.waitOn(nil)
	w.posted = append(w.posted, e.Post(w.creator, w.s.ID, "before", 0))
	for _, r := range w.rs {
		for !contains64(r.shown(), w.posted[0].Seq) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return w
}

// fullest returns the gateway holding the most viewers, failing when the
// stream sits on one.
func (w *twoWide) fullest(t *testing.T) int {
	victim := 0
	for i, g := range w.gws {
		if g.Viewers() > w.gws[victim].Viewers() {
			victim = i
		}
	}
	if held := w.gws[victim].Viewers(); held == len(w.rs) || held == 0 {
		t.Fatalf("the stream is on one gateway (%d of %d viewers on %s)", held, len(w.rs), w.targets[victim].Name)
	}
	return victim
}

// waitOn waits until every viewer is connected to a gateway not in out.
func (w *twoWide) waitOn(out map[int]bool) {
	w.e.Eventually(livetest.Wait, func() string {
		n := 0
		for i, g := range w.gws {
			if !out[i] {
				n += g.Viewers()
			}
		}
		if n != len(w.rs) {
			return fmt.Sprintf("%d of %d viewers connected", n, len(w.rs))
		}
		return ""
	})
}

// checkResumed posts a last comment and checks that every viewer was
// shown every comment posted, once, in order.
func (w *twoWide) checkResumed(t *testing.T) {
	w.posted = append(w.posted, w.e.Post(w.creator, w.s.ID, "after", 0))
	for i, r := range w.rs {
		w.e.Eventually(livetest.Wait, func() string {
			if !contains64(r.shown(), w.posted[len(w.posted)-1].Seq) {
				return fmt.Sprintf("viewer %d has not the last comment", i)
			}
			return ""
		})
		got := r.shown()
		for j := 1; j < len(got); j++ {
			if got[j] <= got[j-1] {
				t.Fatalf("viewer %d: seq %d after %d (a duplicate or reorder across the resume): %v", i, got[j], got[j-1], got)
			}
		}
		for _, c := range w.posted {
			if !contains64(got, c.Seq) {
				t.Fatalf("viewer %d missed %q (seq %d): %v", i, c.Text, c.Seq, got)
			}
		}
	}
}

// Kill a gateway holding half of a stream's viewers (the stream is two
// gateways wide, its creator pre-set): its viewers reconnect through the
// edge, which finds the dead gateway unreachable and sends them to the
// stream's other gateways; they resume with Last-Event-ID and miss
// nothing posted meanwhile, with no duplicate; the surviving gateways'
// recent-cache reads are per subscription, not per viewer.
func TestKillGatewayViewersResume(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := startTwoWide(t, ctx, 300, gateway.Config{})
	victim := w.fullest(t)
	held := w.gws[victim].Viewers()
	readsBefore := w.cache.ranges.Load()
	killed := time.Now()
	w.gws[victim].Kill()
	// Comments keep coming while they reconnect.
	for i := range 5 {
		w.posted = append(w.posted, w.e.Post(w.creator, w.s.ID, fmt.Sprintf("during %d", i), 0))
	}
	w.waitOn(map[int]bool{victim: true})
	back := time.Since(killed)
	w.checkResumed(t)
	reads := w.cache.ranges.Load() - readsBefore
	t.Logf("killed %s holding %d of %d viewers: all back on the stream's other gateways in %s; recent-cache reads meanwhile: %d",
		w.targets[victim].Name, held, len(w.rs), back.Round(time.Millisecond), reads)
	if reads > int64(len(w.gws)) {
		t.Fatalf("%d recent-cache reads for %d resuming viewers: not one per gateway subscription", reads, held)
	}
}

// A gateway that stops gracefully leaves the edge's set (its node leaves
// the registry) and drains: it refuses new viewers, and sends each of its
// viewers away with a reconnection time drawn from [250 ms, DrainSpread],
// so they come back to the stream's other gateways spread over it rather
// than in one burst; they resume with nothing lost and no duplicate, and
// Drain returns once every connection closed.
func TestDrainSpreadsReconnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const spread = 1500 * time.Millisecond
	w := startTwoWide(t, ctx, 200, gateway.Config{DrainSpread: spread})
	victim := w.fullest(t)
	held := w.gws[victim].Viewers()
	var rest []placement.Gateway
	for i, g := range w.targets {
		if i != victim {
			rest = append(rest, g)
		}
	}
	w.edge.SetGateways(rest)
	dctx, dcancel := context.WithTimeout(ctx, livetest.Wait)
	defer dcancel()
	started := time.Now()
	sent := w.gws[victim].Drain(dctx)
	drained := time.Since(started)
	if dctx.Err() != nil {
		t.Fatalf("Drain returned at its deadline with %d viewers left", w.gws[victim].Viewers())
	}
	if sent != held || w.gws[victim].Viewers() != 0 {
		t.Fatalf("Drain sent %d viewers away of %d held, %d left", sent, held, w.gws[victim].Viewers())
	}
	resp, err := http.Get(w.gws[victim].URL + "/v1/streams/" + w.s.ID + "/live")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a draining gateway answered a new viewer %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for i := range 3 {
		w.posted = append(w.posted, w.e.Post(w.creator, w.s.ID, fmt.Sprintf("during %d", i), 0))
	}
	w.waitOn(map[int]bool{victim: true})
	back := time.Since(started)
	w.checkResumed(t)
	lo, hi, given := int(spread.Milliseconds()), 0, 0
	for i, r := range w.rs {
		r.mu.Lock()
		retries := slices.Clone(r.retries)
		r.mu.Unlock()
		for _, ms := range retries {
			if ms < 250 || ms > int(spread.Milliseconds()) {
				t.Fatalf("viewer %d was given a reconnection time of %d ms, outside [250, %d]", i, ms, spread.Milliseconds())
			}
			lo, hi, given = min(lo, ms), max(hi, ms), given+1
		}
	}
	if given != held {
		t.Fatalf("%d viewers were given a reconnection time, %d were drained", given, held)
	}
	// Uniform over 1,250 ms: a hundred draws all within a third of it would be a
	// spread that is not one (odds far below 1e-9).
	if hi-lo < int(spread.Milliseconds())/3 {
		t.Fatalf("reconnection times of %d viewers span %d..%d ms: not spread", given, lo, hi)
	}
	t.Logf("drained %s holding %d of %d viewers in %s (reconnection times %d..%d ms); all back on the stream's other gateways %s after the drain began",
		w.targets[victim].Name, held, len(w.rs), drained.Round(time.Millisecond), lo, hi, back.Round(time.Millisecond))
}

func contains64(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
