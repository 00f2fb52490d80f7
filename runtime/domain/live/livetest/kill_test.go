package livetest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
// browser's EventSource does.
type resumer struct {
	url, token string
	mu         sync.Mutex
	seqs       []int64
	lastID     string
	reconnects int
	back       chan struct{} // a reconnect opened
}

func (r *resumer) run(ctx context.Context) {
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
		r.mu.Unlock()
	}
}

func (r *resumer) shown() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seqs...)
}

// Kill a gateway holding half of a stream's viewers (the stream is two
// gateways wide, its creator pre-set): its viewers reconnect through the
// edge, which finds the dead gateway unreachable and sends them to the
// stream's other gateways; they resume with Last-Event-ID and miss
// nothing posted meanwhile, with no duplicate; the surviving gateways'
// recent-cache reads are per subscription, not per viewer.
func TestKillGatewayViewersResume(t *testing.T) {
	const viewers = 300
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache := &countingCache{Mem: recent.New()}
	e := livetest.Start(t, livetest.Backends{Cache: cache}, livetest.Options{})
	var gws []livetest.ExtraGateway
	var targets []placement.Gateway
	for i := range 3 {
		g := e.StartGateway(gateway.Config{Name: fmt.Sprintf("gw-%d", i), ReportInterval: 100 * time.Millisecond})
		gws = append(gws, g)
		targets = append(targets, placement.Gateway{Name: fmt.Sprintf("gw-%d", i), Addr: strings.TrimPrefix(g.URL, "http://")})
	}
	dir := placement.NewDirectory(e.B.Board, placement.DirectoryConfig{})
	edge := placement.NewEdge(placement.NewPlacer(dir, placement.PlacerConfig{}), placement.EdgeConfig{Logger: slog.New(slog.DiscardHandler)})
	edge.SetGateways(targets)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/streams/{id}/live", edge)
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)

	creator := e.NewUser()
	if err := placement.SetWidth(ctx, e.B.Board, creator.ID, 2); err != nil {
		t.Fatal(err)
	}
	s := e.CreateStream(creator, "two wide")
	e.Eventually(livetest.Wait, func() string {
		dir.Refresh(ctx)
		if dir.Width(s.ID) != 2 {
			return "width not 2 yet"
		}
		return ""
	})
	rs := make([]*resumer, viewers)
	for i := range rs {
		rs[i] = &resumer{url: front.URL + "/v1/streams/" + s.ID + "/live", back: make(chan struct{}, 4)}
		go rs[i].run(ctx)
	}
	e.Eventually(livetest.Wait, func() string {
		n := 0
		for _, g := range gws {
			n += g.Viewers()
		}
		if n != viewers {
			return fmt.Sprintf("%d of %d viewers connected", n, viewers)
		}
		return ""
	})
	// The fullest gateway dies.
	victim := 0
	for i, g := range gws {
		if g.Viewers() > gws[victim].Viewers() {
			victim = i
		}
	}
	held := gws[victim].Viewers()
	if held == viewers || held == 0 {
		t.Fatalf("the stream is on one gateway (%d of %d viewers on %s)", held, viewers, targets[victim].Name)
	}
	var posted []livetest.Comment
	posted = append(posted, e.Post(creator, s.ID, "before", 0))
	for _, r := range rs {
		for !contains64(r.shown(), posted[0].Seq) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	readsBefore := cache.ranges.Load()
	killed := time.Now()
	gws[victim].Kill()
	// Comments keep coming while they reconnect.
	for i := range 5 {
		posted = append(posted, e.Post(creator, s.ID, fmt.Sprintf("during %d", i), 0))
	}
	e.Eventually(livetest.Wait, func() string {
		n := 0
		for i, g := range gws {
			if i != victim {
				n += g.Viewers()
			}
		}
		if n != viewers {
			return fmt.Sprintf("%d of %d viewers back on the other gateways", n, viewers)
		}
		return ""
	})
	back := time.Since(killed)
	posted = append(posted, e.Post(creator, s.ID, "after", 0))
	for i, r := range rs {
		e.Eventually(livetest.Wait, func() string {
			if !contains64(r.shown(), posted[len(posted)-1].Seq) {
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
		for _, c := range posted {
			if !contains64(got, c.Seq) {
				t.Fatalf("viewer %d missed %q (seq %d): %v", i, c.Text, c.Seq, got)
			}
		}
	}
	reads := cache.ranges.Load() - readsBefore
	t.Logf("killed %s holding %d of %d viewers: all back on the stream's other gateways in %s; recent-cache reads meanwhile: %d",
		targets[victim].Name, held, viewers, back.Round(time.Millisecond), reads)
	if reads > int64(len(gws)) {
		t.Fatalf("%d recent-cache reads for %d resuming viewers: not one per gateway subscription", reads, held)
	}
}

func contains64(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
