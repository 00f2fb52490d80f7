//go:build integration && livebench

package live

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/live/livetest"
)

// benchEnvInt reads a positive integer from the environment, def when unset.
func benchEnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestBenchPostToScreenSplit is a benchmark (build tags integration and
// livebench, never part of make test): LIVEBENCH_VIEWERS SSE viewers
// (default 10,000) split over two `concord serve --roles=live-gateway`
// processes, with live-api, live-router and live-archiver in processes of
// their own on Kafka, Redis and Cassandra. One comment every 200 ms
// (LIVEBENCH_COMMENTS, default 50) is posted to the live-api; each
// viewer is a raw TCP connection read by one goroutine of this process
// that stamps the moment it parses the comment's line. It reports:
//   - post-to-screen p50/p99, from sending the POST to a viewer reading it;
//   - backbone copies per relay batch: relay batches the gateways received
//     over batches the router published (equal to the number of
//     subscribed gateways when fan-out does not scale with viewers);
//   - gateway CPU per delivered comment per viewer (/proc utime+stime);
//   - idle resident memory per viewer of a gateway process (VmRSS growth
//     from before the viewers connect to when all are subscribed).
//
// It fails only when a comment does not reach every viewer.
func TestBenchPostToScreenSplit(t *testing.T) {
	viewers := benchEnvInt(t, "LIVEBENCH_VIEWERS", 10000)
	comments := benchEnvInt(t, "LIVEBENCH_COMMENTS", 50)
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	// The per-address cap stays on (the bench's viewers all come from
	// 127.0.0.1, so it is raised above the viewer count per gateway).
	capFlag := fmt.Sprintf("--http-max-conns-per-addr=%d", viewers)
	gws := []*proc{d.start(t, "gw-a", "--roles=live-gateway", capFlag), d.start(t, "gw-b", "--roles=live-gateway", capFlag)}
	router := d.start(t, "router", "--roles=live-router")
	d.start(t, "archiver", "--roles=live-archiver")
	register := livetest.Register(chat.url)
	alice := register(t)
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{})
	s := e.CreateStream(alice, "bench")

	rss0 := []int64{procRSS(t, gws[0]), procRSS(t, gws[1])}
	got := make([]atomic.Int32, comments)
	recv := make([][]time.Time, viewers) // per viewer, per comment index
	var open sync.WaitGroup
	conns := make([]net.Conn, viewers)
	dialStart := time.Now()
	for i := range viewers {
		gw := gws[i%2]
		u, _ := url.Parse(gw.url)
		c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			t.Fatalf("viewer %d: %v (opened %d)", i, err, i)
		}
		conns[i] = c
		recv[i] = make([]time.Time, comments)
		fmt.Fprintf(c, "GET /v1/streams/%s/live HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", s.ID, u.Host)
		open.Add(1)
		go readViewer(c, recv[i], got, &open)
	}
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	open.Wait()
	total := func(metric string, ps ...*proc) float64 {
		sum := 0.0
		for _, p := range ps {
			sum += scrape(t, p, metric)
		}
		return sum
	}
	deadline := time.Now().Add(2 * time.Minute)
	for total("concord_live_gateway_viewers", gws...) < float64(viewers) {
		if time.Now().After(deadline) {
			t.Fatalf("only %v of %d viewers subscribed after 2 min", total("concord_live_gateway_viewers", gws...), viewers)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d viewers open in %v", viewers, time.Since(dialStart).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // let the opening snapshots settle before the idle reading
	rss1 := []int64{procRSS(t, gws[0]), procRSS(t, gws[1])}
	perViewerRSS := float64(rss1[0]-rss0[0]+rss1[1]-rss0[1]) / float64(viewers)

	routerBatches0 := total("concord_live_router_batches_total", router)
	gwBatches0 := total("concord_live_gateway_batches_total", gws...)
	cpu0 := procCPU(t, gws[0]) + procCPU(t, gws[1])
	posted := make([]time.Time, comments)
	for i := range comments {
		posted[i] = time.Now()
		e.Post(alice, s.ID, fmt.Sprintf("bench-%d", i), int64(i))
		time.Sleep(200 * time.Millisecond)
	}
	deadline = time.Now().Add(time.Minute)
	for i := range comments {
		for got[i].Load() < int32(viewers) {
			if time.Now().After(deadline) {
				t.Fatalf("comment %d reached %d of %d viewers", i, got[i].Load(), viewers)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cpu1 := procCPU(t, gws[0]) + procCPU(t, gws[1])
	routerBatches := total("concord_live_router_batches_total", router) - routerBatches0
	gwBatches := total("concord_live_gateway_batches_total", gws...) - gwBatches0

	lat := make([]time.Duration, 0, viewers*comments)
	for v := range viewers {
		for i, at := range recv[v] {
			lat = append(lat, at.Sub(posted[i]))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99, worst := lat[len(lat)*50/100], lat[len(lat)*99/100], lat[len(lat)-1]
	deliveries := float64(viewers * comments)
	t.Logf("RESULT viewers=%d gateways=2 comments=%d p50=%v p99=%v max=%v", viewers, comments,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond))
	t.Logf("RESULT router batches=%v gateway batches received=%v copies/batch=%.2f (subscribed gateways 2, viewers %d)",
		routerBatches, gwBatches, gwBatches/routerBatches, viewers)
	t.Logf("RESULT gateway CPU %.2f s for %v deliveries: %.2f µs per comment per viewer",
		cpu1-cpu0, deliveries, (cpu1-cpu0)*1e6/deliveries)
	t.Logf("RESULT gateway RSS growth %d KB + %d KB: %.1f KB per idle viewer", (rss1[0]-rss0[0])>>10, (rss1[1]-rss0[1])>>10, perViewerRSS/1024)
}

// readViewer reads one SSE response, marking in at the first time it
// reads the data line of comment "bench-<i>".
func readViewer(c net.Conn, at []time.Time, got []atomic.Int32, open *sync.WaitGroup) {
	br := bufio.NewReaderSize(c, 2048)
	status, err := br.ReadSlice('\n')
	open.Done()
	if err != nil || !bytes.Contains(status, []byte(" 200 ")) {
		return
	}
	marker := []byte(`"text":"bench-`)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		j := bytes.Index(line, marker)
		if j < 0 {
			continue
		}
		now := time.Now()
		rest := line[j+len(marker):]
		k := bytes.IndexByte(rest, '"')
		if k < 0 {
			continue
		}
		i, err := strconv.Atoi(string(rest[:k]))
		if err != nil || i < 0 || i >= len(at) || !at[i].IsZero() {
			continue
		}
		at[i] = now
		got[i].Add(1)
	}
}

// scrape reads one unlabelled metric from a process's /metrics.
func scrape(t *testing.T, p *proc, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", p.name, sc.Text(), err)
			}
			return f
		}
	}
	t.Fatalf("%s/metrics has no %s", p.name, name)
	return 0
}

// procCPU is a process's user+system CPU seconds so far.
func procCPU(t *testing.T, p *proc) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at state.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ is 100 on Linux
}

// procRSS is a process's resident set in bytes.
func procRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("%s: no VmRSS", p.name)
	return 0
}
