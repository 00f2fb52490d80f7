//go:build integration && livebench

package live

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
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

// buildViewers builds the viewer-client program in the package folder
// name (floodviewers, killviewers) into dir and returns its path.
func buildViewers(t *testing.T, dir, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = name
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// TestBenchPostToScreenSplit is a benchmark (build tags integration and
// livebench, never part of make test): LIVEBENCH_VIEWERS SSE viewers
// (default 10,000) split over two `concord serve --roles=live-gateway`
// processes, with live-api, live-router and live-archiver in processes of
// their own on Kafka, Redis and Cassandra. One comment every 200 ms
// (LIVEBENCH_COMMENTS, default 50; LIVEBENCH_GAP=50ms posts one every
// 50 ms, start to start, a busy stream) is posted to the live-api; each
// viewer is a raw TCP connection (from 64 loopback source addresses) read
// by one goroutine of this process that stamps the moment it parses the
// comment's line. It reports:
//   - post-to-screen p50/p99, from sending the POST to a viewer reading it;
//   - takedown p50/p99: the creator deletes LIVEBENCH_TAKEDOWNS of the
//     comments (default 20), one every 200 ms, timed from sending the
//     DELETE to each viewer reading the retract event;
//   - backbone copies per relay batch: relay batches the gateways received
//     over batches the router published (equal to the number of
//     subscribed gateways when fan-out does not scale with viewers);
//   - gateway CPU per delivered comment per viewer (/proc utime+stime),
//     and this process's own (the viewers') CPU over the same window;
//   - idle resident memory per viewer of a gateway process (VmRSS growth
//     from before the viewers connect to when all are subscribed).
//
// Then the same viewers and the same comments go through each peer in
// turn: two processes of ./livepeer (github.com/centrifugal/centrifuge's
// SSE broadcast, as a library, on a unidirectional transport), then two
// of ./mercurepeer (github.com/dunglas/mercure's hub as a library), each
// comment published to both processes; latency and CPU per delivery are
// reported the same way and as ratios to the gateways'.
//
// It fails only when a comment or a retraction does not reach every viewer.
func TestBenchPostToScreenSplit(t *testing.T) {
	viewers := benchEnvInt(t, "LIVEBENCH_VIEWERS", 10000)
	comments := benchEnvInt(t, "LIVEBENCH_COMMENTS", 50)
	takedowns := min(benchEnvInt(t, "LIVEBENCH_TAKEDOWNS", 20), comments)
	peerBins := buildPeers(t)
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	// The per-address cap stays on, raised above the viewers each source
	// address opens to one gateway.
	capFlag := fmt.Sprintf("--http-max-conns-per-addr=%d", viewers/benchSources+1)
	// The gateways run with the production ping and viewer-count
	// intervals (15 s, 5 s), overriding the contract suite's 300 ms and
	// 200 ms of setup, which exist so tests observe pings and counts
	// quickly: at 10,000 viewers those would be 33,000 pings and 50,000
	// count events a second, a load no deployment runs and the peer
	// (pinging every 15 s) does not carry.
	gwFlags := []string{"--roles=live-gateway", capFlag, "--live-ping-interval=15s", "--live-report-interval=5s"}
	gws := []*proc{d.start(t, "gw-a", gwFlags...), d.start(t, "gw-b", gwFlags...)}
	router := d.start(t, "router", "--roles=live-router")
	d.start(t, "archiver", "--roles=live-archiver")
	register := livetest.Register(chat.url)
	alice := register(t)
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{})
	s := e.CreateStream(alice, "bench")

	rss0 := []int64{procRSS(t, gws[0]), procRSS(t, gws[1])}
	run := openViewers(t, viewers, comments, takedowns, func(i int) (string, string) {
		u, _ := url.Parse(gws[i%2].url)
		return u.Host, "/v1/streams/" + s.ID + "/live"
	})
	defer run.close()
	total := func(metric string, ps ...*proc) float64 {
		sum := 0.0
		for _, p := range ps {
			sum += scrape(t, p, metric)
		}
		return sum
	}
	awaitCount(t, viewers, func() float64 { return total("concord_live_gateway_viewers", gws...) })
	t.Logf("%d viewers open in %v", viewers, time.Since(run.dialStart).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // let the opening snapshots settle before the idle reading
	rss1 := []int64{procRSS(t, gws[0]), procRSS(t, gws[1])}
	perViewerRSS := float64(rss1[0]-rss0[0]+rss1[1]-rss0[1]) / float64(viewers)

	routerBatches0 := total("concord_live_router_batches_total", router)
	gwBatches0 := total("concord_live_gateway_batches_total", gws...)
	flushSum0 := total("concord_live_gateway_post_to_flush_seconds_sum", gws...)
	flushN0 := total("concord_live_gateway_post_to_flush_seconds_count", gws...)
	ageSum0, ageN0 := total("concord_live_gateway_flush_age_seconds_sum", gws...), total("concord_live_gateway_flush_age_seconds_count", gws...)
	logSum0, logN0 := total("concord_live_router_log_age_seconds_sum", router), total("concord_live_router_log_age_seconds_count", router)
	relSum0, relN0 := total("concord_live_gateway_relay_age_seconds_sum", gws...), total("concord_live_gateway_relay_age_seconds_count", gws...)
	pubSum0, pubN0 := total("concord_live_router_accept_to_publish_seconds_sum", router), total("concord_live_router_accept_to_publish_seconds_count", router)
	// The gateways' CPU while idle, over as long as the comments will
	// take, to tell the per-delivery cost from the processes' background.
	idle0 := procCPU(t, gws[0]) + procCPU(t, gws[1])
	idleFor := time.Duration(comments) * 200 * time.Millisecond
	time.Sleep(idleFor)
	idleRate := (procCPU(t, gws[0]) + procCPU(t, gws[1]) - idle0) / idleFor.Seconds()
	cpu0, self0 := procCPU(t, gws[0])+procCPU(t, gws[1]), selfCPU()
	posted := make([]livetest.Comment, comments)
	postDur := make([]time.Duration, comments)
	measureStart := time.Now()
	load0 := loadAvg()
	run.measure(t, func(i int) {
		t0 := time.Now()
		posted[i] = e.Post(alice, s.ID, fmt.Sprintf("bench-%d", i), int64(i))
		postDur[i] = time.Since(t0)
	})
	measured := time.Since(measureStart)
	load1 := loadAvg()
	cpu1, self1 := procCPU(t, gws[0])+procCPU(t, gws[1]), selfCPU()
	routerBatches := total("concord_live_router_batches_total", router) - routerBatches0
	gwBatches := total("concord_live_gateway_batches_total", gws...) - gwBatches0
	flushMean := (total("concord_live_gateway_post_to_flush_seconds_sum", gws...) - flushSum0) /
		(total("concord_live_gateway_post_to_flush_seconds_count", gws...) - flushN0)
	ageMean := (total("concord_live_gateway_flush_age_seconds_sum", gws...) - ageSum0) / (total("concord_live_gateway_flush_age_seconds_count", gws...) - ageN0)
	logMean := (total("concord_live_router_log_age_seconds_sum", router) - logSum0) / (total("concord_live_router_log_age_seconds_count", router) - logN0)
	pubMean := (total("concord_live_router_accept_to_publish_seconds_sum", router) - pubSum0) / (total("concord_live_router_accept_to_publish_seconds_count", router) - pubN0)
	relMean := (total("concord_live_gateway_relay_age_seconds_sum", gws...) - relSum0) / (total("concord_live_gateway_relay_age_seconds_count", gws...) - relN0)
	postOrder := slices.Clone(postDur) // by comment, for the slowest comments below
	slices.Sort(postDur)

	// Takedowns: the creator deletes the first comments; each viewer
	// stamps the retract event (its data carries the comment's seq).
	seqs := make([]int64, comments)
	for i, c := range posted {
		seqs[i] = c.Seq
	}
	run.seqs.Store(&seqs)
	deleted := make([]time.Time, takedowns)
	deleteDur := make([]time.Duration, takedowns)
	for i := range takedowns {
		deleted[i] = time.Now()
		r := e.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+posted[i].ID, alice.Token, map[string]string{"reason": "bench"})
		deleteDur[i] = time.Since(deleted[i])
		if r.Status != http.StatusNoContent {
			t.Fatalf("delete %d: status %d: %s", i, r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(deleteDur)
	run.await(t, "retraction", run.gotRetract, takedowns)

	p50, p99, worst := run.percentiles(run.recv, run.posted)
	tp50, tp99, tworst := run.percentiles(run.retracted, deleted)
	deliveries := float64(viewers * comments)
	gwCPU := (cpu1 - cpu0) * 1e6 / deliveries
	gwBusy := (cpu1 - cpu0 - idleRate*measured.Seconds()) * 1e6 / deliveries
	t.Logf("RESULT viewers=%d gateways=2 comments=%d p50=%v p99=%v max=%v (load average %s → %s)", viewers, comments,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), load0, load1)
	t.Logf("RESULT takedowns=%d (DELETE sent to retract read) p50=%v p99=%v max=%v", takedowns,
		tp50.Round(time.Millisecond), tp99.Round(time.Millisecond), tworst.Round(time.Millisecond))
	t.Logf("RESULT router batches=%v gateway batches received=%v copies/batch=%.2f (subscribed gateways 2, viewers %d)",
		routerBatches, gwBatches, gwBatches/routerBatches, viewers)
	t.Logf("RESULT hops: POST answered p50=%v max=%v; gateway post-to-flush mean %v (accept stamp to the write)",
		postDur[len(postDur)/2].Round(time.Millisecond), postDur[len(postDur)-1].Round(time.Millisecond),
		time.Duration(flushMean*1e9).Round(time.Millisecond))
	t.Logf("RESULT hops: router read from the log %v after accept, published %v after accept, gateways received %v after accept (means)",
		time.Duration(logMean*1e9).Round(time.Millisecond), time.Duration(pubMean*1e9).Round(time.Millisecond),
		time.Duration(relMean*1e9).Round(time.Millisecond))
	t.Logf("RESULT hops: a flush's start to its write to a viewer %v (mean over viewers and flushes: the write loop's share)",
		time.Duration(ageMean*1e9).Round(time.Millisecond))
	t.Logf("RESULT slowest comments (99th percentile over the viewers; POST answered in): %s", run.slowest(3, postOrder))
	t.Logf("RESULT hops: DELETE answered p50=%v max=%v", deleteDur[len(deleteDur)/2].Round(time.Millisecond),
		deleteDur[len(deleteDur)-1].Round(time.Millisecond))
	t.Logf("RESULT gateway CPU %.2f s for %v deliveries: %.2f µs per comment per viewer, %.2f µs above the idle rate of %.3f cores (viewers' own CPU in this process %.2f µs)",
		cpu1-cpu0, deliveries, gwCPU, gwBusy, idleRate, (self1-self0)*1e6/deliveries)
	t.Logf("RESULT gateway RSS growth %d KB + %d KB: %.1f KB per idle viewer", (rss1[0]-rss0[0])>>10, (rss1[1]-rss0[1])>>10, perViewerRSS/1024)
	run.close()
	for _, p := range append([]*proc{chat, router}, gws...) {
		select {
		case <-p.done:
			t.Errorf("%s exited during the run: %v", p.name, p.cmd.ProcessState)
		default:
		}
	}

	// The peers: the same viewers and comments through centrifuge, then
	// through mercure, one after the other.
	bodies := make([][]byte, comments)
	for i := range posted {
		bodies[i], _ = json.Marshal(posted[i])
	}
	for _, pb := range peerBins {
		pr := runPeer(t, pb, viewers, comments, idleFor, bodies)
		t.Logf("RESULT %s viewers=%d processes=2 comments=%d p50=%v p99=%v max=%v (load average %s → %s)", pb.name, viewers, comments,
			pr.p50.Round(time.Millisecond), pr.p99.Round(time.Millisecond), pr.worst.Round(time.Millisecond), pr.load0, pr.load1)
		t.Logf("RESULT %s CPU %.2f s for %v deliveries: %.2f µs per comment per viewer, %.2f µs above the idle rate of %.3f cores (viewers' own CPU %.2f µs)",
			pb.name, pr.cpu, deliveries, pr.cpu*1e6/deliveries, pr.busy*1e6/deliveries, pr.idleRate, pr.self*1e6/deliveries)
		t.Logf("RESULT ratio gateway/%s: CPU per delivery %.2f (above idle %.2f), p50 %.2f, p99 %.2f", pb.name,
			gwCPU/(pr.cpu*1e6/deliveries), gwBusy/(pr.busy*1e6/deliveries), float64(p50)/float64(pr.p50), float64(p99)/float64(pr.p99))
	}
	for _, p := range append([]*proc{chat, router}, gws...) {
		select {
		case <-p.done:
			t.Errorf("%s exited: %v", p.name, p.cmd.ProcessState)
		default:
		}
	}
}

// peerResult is one peer's run: latency, and CPU seconds of its two
// processes over the comments (cpu), above their idle rate (busy), and
// of this process (the viewers).
type peerResult struct {
	p50, p99, worst           time.Duration
	cpu, busy, self, idleRate float64
	load0, load1              string // the machine's 1-minute load average before and after
}

// runPeer runs the bench's viewers and comments through two processes of
// one peer binary: viewers dial them, an idle window of idleFor gives
// their background rate, then each body is published to both, 200 ms
// apart, until every viewer read every comment.
func runPeer(t *testing.T, pb peerBin, viewers, comments int, idleFor time.Duration, bodies [][]byte) peerResult {
	t.Helper()
	peers := []*peerProc{startPeer(t, pb.path), startPeer(t, pb.path)}
	defer peers[0].stop()
	defer peers[1].stop()
	prun := openViewers(t, viewers, comments, 0, func(i int) (string, string) {
		return peers[i%2].host, "/sse"
	})
	defer prun.close()
	awaitCount(t, viewers, func() float64 { return peers[0].subscribers(t) + peers[1].subscribers(t) })
	time.Sleep(2 * time.Second)
	cpu := func() float64 { return peers[0].cpu(t) + peers[1].cpu(t) }
	idle0 := cpu()
	time.Sleep(idleFor)
	var r peerResult
	r.idleRate = (cpu() - idle0) / idleFor.Seconds()
	cpu0, self0 := cpu(), selfCPU()
	start := time.Now()
	r.load0 = loadAvg()
	prun.measure(t, func(i int) {
		for _, p := range peers {
			p.publish(t, bodies[i])
		}
	})
	r.load1 = loadAvg()
	r.cpu, r.self = cpu()-cpu0, selfCPU()-self0
	r.busy = r.cpu - r.idleRate*time.Since(start).Seconds()
	r.p50, r.p99, r.worst = prun.percentiles(prun.recv, prun.posted)
	return r
}

// benchSources is the number of loopback source addresses the viewers
// are spread over (127.0.0.10 on), so no address holds more than
// viewers/benchSources connections and ephemeral ports do not run out.
const benchSources = 64

// viewerRun is one set of raw SSE viewers and what they read.
type viewerRun struct {
	viewers, comments int
	dialStart         time.Time
	conns             []net.Conn
	recv              [][]time.Time // per viewer, per comment index
	retracted         [][]time.Time // per viewer, per deleted comment index
	got, gotRetract   []atomic.Int32
	posted            []time.Time
	seqs              atomic.Pointer[[]int64] // comment seqs by index, set before deletes
}

// openViewers dials n viewers (target gives viewer i's host and path)
// and waits until each has its response head.
func openViewers(t *testing.T, n, comments, takedowns int, target func(i int) (host, path string)) *viewerRun {
	t.Helper()
	r := &viewerRun{viewers: n, comments: comments, dialStart: time.Now(), conns: make([]net.Conn, n),
		recv: make([][]time.Time, n), retracted: make([][]time.Time, n),
		got: make([]atomic.Int32, comments), gotRetract: make([]atomic.Int32, max(takedowns, 1))}
	var open sync.WaitGroup
	for i := range n {
		host, path := target(i)
		dialer := net.Dialer{Timeout: 10 * time.Second,
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+i%benchSources))}}
		if i > 0 && i%500 == 0 {
			// In waves: a loaded server's accept queue overflows (a reset)
			// when thousands of connects arrive at once.
			open.Wait()
		}
		c, err := dialer.Dial("tcp", host)
		for attempt := 1; err != nil && attempt <= 5; attempt++ {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
			c, err = dialer.Dial("tcp", host)
		}
		if err != nil {
			r.close()
			t.Fatalf("viewer %d: %v (opened %d)", i, err, i)
		}
		r.conns[i] = c
		r.recv[i] = make([]time.Time, comments)
		r.retracted[i] = make([]time.Time, takedowns)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, host)
		open.Add(1)
		go r.read(c, i, &open)
	}
	open.Wait()
	return r
}

func (r *viewerRun) close() {
	for _, c := range r.conns {
		if c != nil {
			c.Close()
		}
	}
}

// awaitCount waits up to two minutes for count() to reach n.
func awaitCount(t *testing.T, n int, count func() float64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for count() < float64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("only %v of %d viewers subscribed after 2 min", count(), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchGap is LIVEBENCH_GAP (a duration): when set, comments are posted
// that far apart, start to start (a busy stream: 50ms is 20 a second);
// unset, each POST is followed by a 200 ms pause, as in the recorded runs
// before it existed.
func benchGap(t *testing.T) time.Duration {
	v := os.Getenv("LIVEBENCH_GAP")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("LIVEBENCH_GAP=%q: want a positive duration", v)
	}
	return d
}

// measure calls post(i) for each comment, 200 ms apart (LIVEBENCH_GAP),
// stamping the moment before each, and waits until every viewer has read
// them all.
func (r *viewerRun) measure(t *testing.T, post func(i int)) {
	t.Helper()
	gap := benchGap(t)
	r.posted = make([]time.Time, r.comments)
	for i := range r.comments {
		r.posted[i] = time.Now()
		post(i)
		if gap > 0 {
			time.Sleep(time.Until(r.posted[i].Add(gap)))
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	r.await(t, "comment", r.got, r.comments)
}

// await waits up to a minute until every viewer counted each of the
// first k events of got.
func (r *viewerRun) await(t *testing.T, what string, got []atomic.Int32, k int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := range k {
		for got[i].Load() < int32(r.viewers) {
			if time.Now().After(deadline) {
				t.Fatalf("%s %d reached %d of %d viewers", what, i, got[i].Load(), r.viewers)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// percentiles of at[v][i] - from[i] over every viewer v and index i.
func (r *viewerRun) percentiles(at [][]time.Time, from []time.Time) (p50, p99, worst time.Duration) {
	var lat []time.Duration
	for v := range at {
		for i, a := range at[v] {
			lat = append(lat, a.Sub(from[i]))
		}
	}
	if len(lat) == 0 {
		return 0, 0, 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)*50/100], lat[len(lat)*99/100], lat[len(lat)-1]
}

// slowest describes the k comments whose 99th-percentile latency over
// the viewers is highest, with how long their POST took to answer: a tail
// made by one slow POST (the API and the log) reads differently from one
// spread over every comment (the fan-out).
func (r *viewerRun) slowest(k int, postDur []time.Duration) string {
	type one struct {
		i   int
		p99 time.Duration
	}
	var all []one
	for i := range r.comments {
		lat := make([]time.Duration, 0, len(r.recv))
		for v := range r.recv {
			lat = append(lat, r.recv[v][i].Sub(r.posted[i]))
		}
		slices.Sort(lat)
		all = append(all, one{i, lat[len(lat)*99/100]})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].p99 > all[b].p99 })
	var parts []string
	for _, o := range all[:min(k, len(all))] {
		parts = append(parts, fmt.Sprintf("#%d %v (POST %v)", o.i, o.p99.Round(time.Millisecond), postDur[o.i].Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// read reads viewer v's SSE response, stamping the first time it reads
// the data line of comment "bench-<i>" and of the retraction of a comment
// whose seq is in r.seqs.
func (r *viewerRun) read(c net.Conn, v int, open *sync.WaitGroup) {
	br := bufio.NewReaderSize(c, 2048)
	status, err := br.ReadSlice('\n')
	open.Done()
	if err != nil || !bytes.Contains(status, []byte(" 200 ")) {
		return
	}
	marker := []byte(`"text":"bench-`)
	retract := []byte(`"comment_id":"`)
	seqKey := []byte(`"seq":`)
	at := r.recv[v]
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		if bytes.Contains(line, retract) {
			now := time.Now()
			j := bytes.Index(line, seqKey)
			seqs := r.seqs.Load()
			if j < 0 || seqs == nil {
				continue
			}
			rest := line[j+len(seqKey):]
			k := bytes.IndexAny(rest, ",}")
			seq, err := strconv.ParseInt(string(rest[:max(k, 0)]), 10, 64)
			if err != nil {
				continue
			}
			i := sort.Search(len(*seqs), func(n int) bool { return (*seqs)[n] >= seq })
			if i < len(r.retracted[v]) && (*seqs)[i] == seq && r.retracted[v][i].IsZero() {
				r.retracted[v][i] = now
				r.gotRetract[i].Add(1)
			}
			continue
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
		r.got[i].Add(1)
	}
}

// loadAvg is the machine's 1-minute load average, as /proc/loadavg has it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// selfCPU is this process's user+system CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
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
	return pidCPU(t, p.cmd.Process.Pid)
}

// pidCPU is a process's user+system CPU seconds so far.
func pidCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
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
