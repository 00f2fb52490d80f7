package livetest_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/placement"
	"github.com/concord-chat/concord/runtime/domain/live/relay"
)

// countingRelay records the copies of every publish per stream: the
// backbone copies the router paid for each batch.
type countingRelay struct {
	*relay.Mem
	mu     sync.Mutex
	copies map[snowflake.ID][]int
}

func (c *countingRelay) Publish(ctx context.Context, stream snowflake.ID, msg []byte) error {
	_, err := c.PublishCount(ctx, stream, msg)
	return err
}

func (c *countingRelay) PublishCount(ctx context.Context, stream snowflake.ID, msg []byte) (int, error) {
	n, err := c.Mem.PublishCount(ctx, stream, msg)
	c.mu.Lock()
	c.copies[stream] = append(c.copies[stream], n)
	c.mu.Unlock()
	return n, err
}

func (c *countingRelay) last(stream snowflake.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.copies[stream]
	if len(cs) == 0 {
		return 0
	}
	return cs[len(cs)-1]
}

// Placement by stream affinity with real gateways: five gateways behind
// the edge (runtime/domain/live/placement) and the same audiences on streams
// whose viewers pick a gateway at random, in one run. A comment on an
// edge-placed stream costs one backbone copy (its one gateway); on a
// randomly placed one, a copy per gateway its viewers landed on. Then a
// creator's preset width of 2 widens their stream: new viewers spread
// over two gateways, and the connections already open stay where they
// are and keep receiving: changing k never moves a connection.
func TestAffinityPlacement(t *testing.T) {
	ctx := context.Background()
	cr := &countingRelay{Mem: relay.New(), copies: map[snowflake.ID][]int{}}
	e := livetest.Start(t, livetest.Backends{Relay: cr}, livetest.Options{})
	const fleet = 5
	var gws []livetest.ExtraGateway
	var targets []placement.Gateway
	for i := range fleet {
		g := e.StartGateway(gateway.Config{Name: fmt.Sprintf("gw-%d", i), ReportInterval: 50 * time.Millisecond})
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
	sizes := []int{2, 5, 10, 20}
	rng := rand.New(rand.NewPCG(5, 6))
	type run struct {
		stream  livetest.Stream
		viewers []*livetest.Viewer
	}
	var affinity, random []run
	for _, n := range sizes {
		a := run{stream: e.CreateStream(creator, fmt.Sprintf("affinity %d", n))}
		r := run{stream: e.CreateStream(creator, fmt.Sprintf("random %d", n))}
		for range n {
			a.viewers = append(a.viewers, livetest.Watch(t, front.URL, a.stream.ID, nil, ""))
			r.viewers = append(r.viewers, livetest.Watch(t, gws[rng.IntN(fleet)].URL, r.stream.ID, nil, ""))
		}
		affinity, random = append(affinity, a), append(random, r)
	}
	post := func(runs []run, text string) (copies []int) {
		t.Helper()
		for _, r := range runs {
			c := e.Post(creator, r.stream.ID, text, 0)
			for _, v := range r.viewers {
				if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
					t.Fatalf("viewer of %s got %s, want %s", r.stream.Title, got[0].ID, c.ID)
				}
			}
			id, _ := snowflake.Parse(r.stream.ID)
			copies = append(copies, cr.last(id))
		}
		return copies
	}
	for _, rs := range [][]run{affinity, random} {
		for _, r := range rs {
			for _, v := range r.viewers {
				v.Next(livetest.Wait, "state")
			}
		}
	}
	ac, rc := post(affinity, "one"), post(random, "one")
	t.Logf("backbone copies per comment, streams of %v viewers on %d gateways: affinity %v, random %v", sizes, fleet, ac, rc)
	for i := range sizes {
		if ac[i] != 1 {
			t.Fatalf("a %d-viewer stream placed by affinity cost %d copies per comment", sizes[i], ac[i])
		}
	}
	if rc[len(rc)-1] < 3 {
		t.Fatalf("20 viewers at random on %d gateways cost %d copies: the comparison is not measuring anything", fleet, rc[len(rc)-1])
	}

	// Widening: the creator of a new stream is pre-set to 2 gateways.
	if err := placement.SetWidth(ctx, e.B.Board, creator.ID, 2); err != nil {
		t.Fatal(err)
	}
	wide := e.CreateStream(creator, "wide")
	e.Eventually(livetest.Wait, func() string {
		if err := dir.Refresh(ctx); err != nil {
			return err.Error()
		}
		if k := dir.Width(wide.ID); k != 2 {
			return fmt.Sprintf("width %d", k)
		}
		return ""
	})
	// The preset widens the creator's streams already watched too; their
	// open connections stay where they are (below: every gateway keeps
	// its connections, and a comment on each still costs one copy).
	for _, r := range affinity {
		if k := dir.Width(r.stream.ID); k != 2 {
			t.Fatalf("stream %q: width %d after its creator's preset of 2", r.stream.Title, k)
		}
	}
	before := make([]int, fleet)
	for i, g := range gws {
		before[i] = g.Viewers()
	}
	var wideViewers []*livetest.Viewer
	for range 8 {
		wideViewers = append(wideViewers, livetest.Watch(t, front.URL, wide.ID, nil, ""))
	}
	// The stream's two gateways are its first two on the ring; its
	// viewers go to the less loaded of them.
	var names []string
	for _, g := range targets {
		names = append(names, g.Name)
	}
	own := map[string]bool{}
	placement.NewRing(names).Walk(wide.ID, func(n string) bool { own[n] = true; return len(own) < 2 })
	for i, g := range gws {
		if g.Viewers() > before[i] && !own[targets[i].Name] {
			t.Fatalf("a viewer of the 2-wide stream went to %s, not one of its gateways %v", targets[i].Name, own)
		}
		if g.Viewers() < before[i] {
			t.Fatalf("gateway %d lost connections when a stream widened: %d -> %d", i, before[i], g.Viewers())
		}
	}
	c := e.Post(creator, wide.ID, "wide", 0)
	for _, v := range wideViewers {
		if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
			t.Fatalf("wide viewer got %s", got[0].ID)
		}
	}
	ac2 := post(affinity, "two")
	for i := range sizes {
		if ac2[i] != 1 {
			t.Fatalf("after widening another stream, a %d-viewer stream costs %d copies", sizes[i], ac2[i])
		}
	}
}
