package livetest_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/placement"
	"github.com/concord-chat/concord/runtime/domain/live/relay"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// BenchmarkAffinityCopies measures backbone copies per comment with
// placement by stream affinity against random placement, in one run on
// the same gateways: LIVEBENCH_VIEWERS SSE viewers (default 2,000) over
// LIVEBENCH_GATEWAYS gateways (default 8), on streams whose audiences
// follow a power law (a few big, many small), the same audiences twice:
// once through the edge, once each viewer on a gateway drawn at random.
// Each stream then gets one comment; its copies are the gateways
// subscribed to it when the router published. Reported: copies per
// comment for each placement, and the ideal (the streams' widths).
func BenchmarkAffinityCopies(b *testing.B) {
	viewers := envInt("LIVEBENCH_VIEWERS", 2000)
	fleetSize := envInt("LIVEBENCH_GATEWAYS", 8)
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		cr := &countingRelay{Mem: relay.New(), copies: map[snowflake.ID][]int{}}
		e := livetest.Start(b, livetest.Backends{Relay: cr}, livetest.Options{})
		var gws []livetest.ExtraGateway
		var targets []placement.Gateway
		for i := range fleetSize {
			g := e.StartGateway(gateway.Config{Name: fmt.Sprintf("gw-%d", i), ReportInterval: time.Second})
			gws = append(gws, g)
			targets = append(targets, placement.Gateway{Name: fmt.Sprintf("gw-%d", i), Addr: strings.TrimPrefix(g.URL, "http://")})
		}
		dir := placement.NewDirectory(e.B.Board, placement.DirectoryConfig{})
		go dir.Run(ctx, nil)
		edge := placement.NewEdge(placement.NewPlacer(dir, placement.PlacerConfig{}), placement.EdgeConfig{Logger: slog.New(slog.DiscardHandler)})
		edge.SetGateways(targets)
		mux := http.NewServeMux()
		mux.Handle("GET /v1/streams/{id}/live", edge)
		front := httptest.NewServer(mux)

		// Audiences: stream i has two thirds of what stream i-1 has, from
		// an eighth of the viewers down to 5, then streams of 20 until half
		// the viewers are placed; the same sizes for both placements.
		var sizes []int
		left := viewers / 2
		for size := viewers / 8; size >= 5 && left >= size; size = size * 2 / 3 {
			sizes = append(sizes, size)
			left -= size
		}
		for ; left >= 20; left -= 20 {
			sizes = append(sizes, 20)
		}
		creator := e.NewUser()
		rng := rand.New(rand.NewPCG(7, 8))
		type run struct {
			stream livetest.Stream
			n      int
		}
		var aff, rnd []run
		var conns []*sse.Stream
		for _, n := range sizes {
			a := run{stream: e.CreateStream(creator, "affinity"), n: n}
			r := run{stream: e.CreateStream(creator, "random"), n: n}
			for range n {
				s, err := sse.Dial(ctx, nil, front.URL+"/v1/streams/"+a.stream.ID+"/live", nil)
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, s)
				s2, err := sse.Dial(ctx, nil, gws[rng.IntN(fleetSize)].URL+"/v1/streams/"+r.stream.ID+"/live", nil)
				if err != nil {
					b.Fatal(err)
				}
				conns = append(conns, s2)
			}
			aff, rnd = append(aff, a), append(rnd, r)
		}
		for _, s := range conns {
			go func() {
				for {
					if _, err := s.Next(); err != nil {
						return
					}
				}
			}()
		}
		e.Eventually(time.Minute, func() string {
			n := 0
			for _, g := range gws {
				n += g.Viewers()
			}
			if n != 2*len(conns)/2 {
				return fmt.Sprintf("%d of %d viewers open", n, len(conns))
			}
			return ""
		})
		copies := func(runs []run) (total int) {
			for _, r := range runs {
				e.Post(creator, r.stream.ID, "one", 0)
				id, _ := snowflake.Parse(r.stream.ID)
				e.Eventually(time.Minute, func() string {
					if cr.last(id) == 0 {
						return "not published yet"
					}
					return ""
				})
				total += cr.last(id)
			}
			return total
		}
		ac, rc := copies(aff), copies(rnd)
		ideal := 0
		for _, n := range sizes {
			ideal += max(1, (n+placement.PerGateway-1)/placement.PerGateway)
		}
		b.ReportMetric(float64(ac)/float64(len(sizes)), "copies/comment-affinity")
		b.ReportMetric(float64(rc)/float64(len(sizes)), "copies/comment-random")
		b.ReportMetric(float64(ideal)/float64(len(sizes)), "copies/comment-ideal")
		b.Logf("%d viewers on %d gateways, %d streams (largest %d, then two thirds each down to 5, then 20 each) per placement: copies for one comment on each stream: %d by affinity, %d at random, ideal %d",
			len(conns), fleetSize, len(sizes), sizes[0], ac, rc, ideal)
		for _, s := range conns {
			s.Close()
		}
		front.Close()
		cancel()
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
