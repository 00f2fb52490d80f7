//go:build integration && livebench

package live

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/test/load"
)

// TestBenchPostToScreenBySize is a benchmark (build tags integration and
// livebench, never part of make test): post-to-screen by stream size. The
// deployment of TestBenchPostToScreenSplit (chat and live-api, two
// live-gateway processes, live-router and live-archiver on Kafka, Redis
// and Cassandra); then, for each size of LIVEBENCH_SIZES (default
// 100,1000,4000) in turn, a new stream with that many SSE viewers split
// over the two gateways and LIVEBENCH_COMMENTS (default 25) comments 200
// ms apart. It logs post-to-screen p50, p99 and max over every viewer and
// comment of each size (RESULT lines) and, with LIVEBENCH_PLOT=path,
// draws them against the stream size. It fails only when a comment does
// not reach every viewer.
func TestBenchPostToScreenBySize(t *testing.T) {
	sizes := benchEnvSizes(t, "LIVEBENCH_SIZES", []int{100, 1000, 4000})
	comments := benchEnvInt(t, "LIVEBENCH_COMMENTS", 25)
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	capFlag := fmt.Sprintf("--http-max-conns-per-addr=%d", slices.Max(sizes)/benchSources+1)
	gwFlags := []string{"--roles=live-gateway", capFlag, "--live-ping-interval=15s", "--live-report-interval=5s"}
	gws := []*proc{d.start(t, "gw-a", gwFlags...), d.start(t, "gw-b", gwFlags...)}
	d.start(t, "router", "--roles=live-router")
	d.start(t, "archiver", "--roles=live-archiver")
	alice := livetest.Register(chat.url)(t)
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{})
	viewers := func() float64 {
		return scrape(t, gws[0], "concord_live_gateway_viewers") + scrape(t, gws[1], "concord_live_gateway_viewers")
	}

	var p50s, p99s plotter.XYs
	for _, n := range sizes {
		// The previous size's viewers are gone from the gateways first.
		deadline := time.Now().Add(2 * time.Minute)
		for viewers() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%v viewers of the previous stream still open after 2 min", viewers())
			}
			time.Sleep(100 * time.Millisecond)
		}
		s := e.CreateStream(alice, fmt.Sprintf("size %d", n))
		run := openViewers(t, n, comments, 0, func(i int) (string, string) {
			u, _ := url.Parse(gws[i%2].url)
			return u.Host, "/v1/streams/" + s.ID + "/live"
		})
		awaitCount(t, n, viewers)
		load0 := loadAvg()
		// The viewers read a comment's index from its text, "bench-<i>".
		run.measure(t, func(i int) { e.Post(alice, s.ID, fmt.Sprintf("bench-%d", i), int64(i)) })
		p50, p99, worst := run.percentiles(run.recv, run.posted)
		t.Logf("RESULT by size: viewers=%d gateways=2 comments=%d p50=%v p99=%v max=%v (load average %s → %s)", n, comments,
			p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), load0, loadAvg())
		run.close()
		p50s = append(p50s, plotter.XY{X: float64(n), Y: float64(p50) / 1e6})
		p99s = append(p99s, plotter.XY{X: float64(n), Y: float64(p99) / 1e6})
	}
	if path := os.Getenv("LIVEBENCH_PLOT"); path != "" {
		err := load.WriteLines(path, load.Chart{Title: "Live comments: post-to-screen by stream size (two gateways)",
			X: "viewers on the stream", Y: "post-to-screen (ms)", LogX: true}, []load.Line{{Name: "p50", Points: p50s}, {Name: "p99", Points: p99s}})
		if err != nil {
			t.Error(err)
		}
	}
}

// benchEnvSizes reads a comma-separated list of positive integers from
// the environment, def when unset.
func benchEnvSizes(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want positive integers, comma-separated", name, v)
		}
		out = append(out, n)
	}
	return out
}
