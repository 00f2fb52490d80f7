//go:build integration && livebench

package live

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/adapters/eventlog/backend"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestBenchFlood is the seed's scale-breaking case, as large as the
// machine holds (tags integration and livebench): LIVEFLOOD_VIEWERS SSE
// viewers of one stream (default 10,000) held by ./floodviewers
// processes of at most LIVEFLOOD_PER_PROC (default 15,000) each, from
// 240 loopback source addresses, spread over LIVEFLOOD_GATEWAYS
// `concord serve --roles=live-gateway` processes (default: one per
// 15,000 viewers, at least 2); live-api (with the chat roles),
// live-router and live-archiver in processes of their own on Kafka,
// Redis and Cassandra. The stream is driven into sampled mode (60
// comments/s until GET /v1/streams/{id} says sampled), then flooded for
// LIVEFLOOD_SECONDS (default 30) with LIVEFLOOD_RATE comments/s (default
// 5,000) appended to its partition the way the API appends them (the
// API's per-user interval would need ~10,000 accounts posting), from
// 100,000 distinct audience accounts, while the creator posts one
// comment every 2.1 s through the API (the per-user interval) (pinned tier) and 20 viewers send a
// reaction batch each every 100 ms through the API. It reports
// comments each viewer read per second, post-to-screen p50/p99 of the
// pinned and the sample tier (one viewer in 100 times every seq it
// reads: pinned from sending the POST, sample from the append),
// gateway CPU per delivered comment, resident memory per viewer (idle,
// before the flood), the router's and archiver's CPU, and reactions
// accepted per second. A live-moderation process scores every comment
// (LIVEFLOOD_MODERATION=0: none, and the router holds the sampled
// stream's events its whole hold); the bench reports how many held
// events its scored marks released early. With LIVEFLOOD_LOCK set (the
// machine's load lock), the lock is taken once the processes are up.
func TestBenchFlood(t *testing.T) {
	viewers := benchEnvInt(t, "LIVEFLOOD_VIEWERS", 10000)
	perProc := benchEnvInt(t, "LIVEFLOOD_PER_PROC", 15000)
	ngw := benchEnvInt(t, "LIVEFLOOD_GATEWAYS", max(2, (viewers+14999)/15000))
	rate := benchEnvInt(t, "LIVEFLOOD_RATE", 5000)
	seconds := benchEnvInt(t, "LIVEFLOOD_SECONDS", 30)
	moderated := benchEnvInt(t, "LIVEFLOOD_MODERATION", 1) != 0
	const sources = 240
	dir := t.TempDir()
	bin := buildViewers(t, dir, "floodviewers")
	d := setup(t)
	chat := d.start(t, "chat", "--roles=gateway,api,guild,live-api")
	capFlag := fmt.Sprintf("--http-max-conns-per-addr=%d", viewers/sources+2)
	gwFlags := []string{"--roles=live-gateway", capFlag, "--live-ping-interval=15s", "--live-report-interval=5s"}
	var gws []*proc
	for i := range ngw {
		gws = append(gws, d.start(t, fmt.Sprintf("gw-%d", i), gwFlags...))
	}
	router := d.start(t, "router", "--roles=live-router")
	archiver := d.start(t, "archiver", "--roles=live-archiver")
	var moderation *proc
	if moderated {
		moderation = d.start(t, "moderation", "--roles=live-moderation")
	}
	if lock := os.Getenv("LIVEFLOOD_LOCK"); lock != "" {
		f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		waited := time.Now()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatalf("flock %s: %v", lock, err)
		}
		t.Logf("took %s after %s", lock, time.Since(waited).Round(time.Second))
	}
	register := livetest.Register(chat.url)
	alice := register(t)
	e := livetest.Remote(t, chat.url, livetest.RemoteRoles{})
	s := e.CreateStream(alice, "flood")
	sid, _ := snowflake.Parse(s.ID)

	// The test's own client of the comments topic, appending as the API does.
	ctx := context.Background()
	var prefix string
	for _, a := range d.args {
		if p, ok := strings.CutPrefix(a, "--live-prefix="); ok {
			prefix = p
		}
	}
	topic := live.TopicsFor(prefix).Comments
	lg, err := eventlogbackend.Open(ctx, "kafka://"+env(t, "CONCORD_KAFKA")+"?partitions=4", "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	pl := lg.(eventlog.Pinned)
	nparts, err := pl.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	part := eventlog.PartitionFor(live.StreamKey(sid), nparts)
	var nextID atomic.Int64
	appendN := func(n int) ([]int64, time.Time) {
		recs := make([]eventlog.Record, n)
		now := time.Now()
		for i := range recs {
			k := nextID.Add(1)
			c := live.Comment{ID: snowflake.FromTime(now) + snowflake.ID(k%4096), StreamID: sid,
				Author: live.Author{ID: snowflake.ID(3_000_000 + k%100_000), Username: "audience"},
				Text:   fmt.Sprintf("comment %d from the audience", k), CreatedAt: now.UTC().Truncate(time.Millisecond)}
			r, err := live.LogRecord{Kind: live.KindComment, StreamID: sid, Comment: &c, AcceptedAt: now.UnixNano(),
				Features: &live.Features{AccountAgeS: 400 * 86400}}.Record(topic)
			if err != nil {
				t.Fatal(err)
			}
			recs[i] = r
		}
		offs, err := pl.AppendTo(ctx, topic, part, recs...)
		if err != nil {
			t.Errorf("append: %v", err)
		}
		return offs, now
	}

	var hosts []string
	for _, g := range gws {
		u, _ := url.Parse(g.url)
		hosts = append(hosts, u.Host)
	}
	rss0 := make([]int64, len(gws))
	for i, g := range gws {
		rss0[i] = procRSS(t, g)
	}
	type vproc struct {
		cmd *exec.Cmd
		in  io.Writer
		out *bufio.Scanner
	}
	var vps []vproc
	opened := time.Now()
	for first := 0; first < viewers; first += perProc {
		n := min(perProc, viewers-first)
		cmd := exec.Command(bin, "-gateways="+strings.Join(hosts, ","), "-path=/v1/streams/"+s.ID+"/live",
			"-n="+strconv.Itoa(n), "-first="+strconv.Itoa(first), "-sources="+strconv.Itoa(sources))
		in, _ := cmd.StdinPipe()
		outp, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(outp)
		sc.Buffer(make([]byte, 1<<20), 1<<28)
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() && stderr.Len() > 0 {
				t.Logf("floodviewers: %.2000s", stderr.String())
			}
		})
		if !sc.Scan() || sc.Text() != "open" {
			t.Fatalf("floodviewers did not open its viewers: %q %v", sc.Text(), sc.Err())
		}
		vps = append(vps, vproc{cmd: cmd, in: in, out: sc})
	}
	total := func(metric string, ps ...*proc) float64 {
		sum := 0.0
		for _, p := range ps {
			sum += scrape(t, p, metric)
		}
		return sum
	}
	awaitCount(t, viewers, func() float64 { return total("concord_live_gateway_viewers", gws...) })
	t.Logf("%d viewers open on %d gateways in %s (load %s)", viewers, ngw, time.Since(opened).Round(time.Millisecond), loadAvg())
	time.Sleep(2 * time.Second)
	var rss int64
	for i, g := range gws {
		rss += procRSS(t, g) - rss0[i]
	}
	stat := func() (open, events int64) {
		for _, vp := range vps {
			fmt.Fprintln(vp.in, "stat")
			if !vp.out.Scan() {
				t.Fatalf("viewer process gone: %v", vp.out.Err())
			}
			var st map[string]int64
			if err := json.Unmarshal(vp.out.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			open += st["open"]
			events += st["events"]
		}
		return open, events
	}

	// Into sampled mode: 60 a second until the API says so.
	warm := time.Now()
	for sampled := false; !sampled; {
		appendN(60)
		time.Sleep(time.Second)
		var view struct {
			Sampled bool `json:"sampled"`
		}
		e.Do("GET", "/v1/streams/"+s.ID, alice.Token, nil).JSON(t, &view)
		sampled = view.Sampled
		if time.Since(warm) > time.Minute {
			t.Fatal("the stream is not sampled a minute into 60 comments a second")
		}
	}
	t.Logf("sampled after %s of 60 comments/s", time.Since(warm).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // the warm-up's tail reaches the viewers
	for _, vp := range vps {
		fmt.Fprintln(vp.in, "times")
		vp.out.Scan()
	}

	// The flood.
	var (
		mu       sync.Mutex
		postedAt = map[int64]time.Time{} // seq -> appended or POST sent
		pinned   = map[int64]bool{}
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		appended atomic.Int64
		reacted  atomic.Int64
	)
	reactors := make([]livetest.User, 20)
	for i := range reactors {
		reactors[i] = register(t)
	}
	// Per hop, means over the window: the API's accept (or the append)
	// to the router's publish, the publish to a gateway's receipt, and
	// the accept to the gateway's flush.
	hops := []struct {
		name   string
		metric string
		ps     []*proc
	}{
		{"accept→router publish", "concord_live_router_accept_to_publish_seconds", []*proc{router}},
		{"log→router read", "concord_live_router_log_age_seconds", []*proc{router}},
		{"accept→gateway receive (through the relay)", "concord_live_gateway_relay_age_seconds", gws},
		{"accept→gateway flush", "concord_live_gateway_post_to_flush_seconds", gws},
	}
	hop0 := make([][2]float64, len(hops))
	for i, h := range hops {
		hop0[i] = [2]float64{total(h.metric+"_sum", h.ps...), total(h.metric+"_count", h.ps...)}
	}
	_, ev0 := stat()
	cpu0 := map[string]float64{}
	cpuOf := func(p *proc) float64 { return procCPU(t, p) }
	for _, g := range gws {
		cpu0[g.name] = cpuOf(g)
	}
	cpu0["router"], cpu0["archiver"], cpu0["chat"] = cpuOf(router), cpuOf(archiver), cpuOf(chat)
	if moderation != nil {
		cpu0["moderation"] = cpuOf(moderation)
	}
	released := func() (scored, hold float64) {
		return scrape(t, router, `concord_live_router_held_released_total{by="scored"}`), scrape(t, router, `concord_live_router_held_released_total{by="hold"}`)
	}
	scored0, hold0 := released()
	var vcpu0 float64
	for _, vp := range vps {
		vcpu0 += pidCPU(t, vp.cmd.Process.Pid)
	}
	start := time.Now()
	// The audience: appenders on their own Kafka produce calls, each
	// keeping its share of the rate (a produce with acks=all takes tens
	// of milliseconds on this machine, so one appender cannot).
	const appenders = 8
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				due := int(float64(rate)*time.Since(start).Seconds()/appenders) - mine
				if due <= 0 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				offs, at := appendN(min(due, 400))
				mine += min(due, 400)
				appended.Add(int64(len(offs)))
				mu.Lock()
				for _, o := range offs {
					postedAt[o] = at
				}
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() { // the creator: pinned
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2100 * time.Millisecond): // the default per-user interval is 2 s
			}
			at := time.Now()
			r := e.Do("POST", "/v1/streams/"+s.ID+"/comments", alice.Token, map[string]any{"text": fmt.Sprintf("creator %d", i), "video_ts_ms": i})
			var c livetest.Comment
			if r.Status != 201 {
				t.Errorf("creator's post = %d %s", r.Status, r.Body)
				continue
			}
			r.JSON(t, &c)
			mu.Lock()
			postedAt[c.Seq], pinned[c.Seq] = at, true
			mu.Unlock()
		}
	}()
	for w, u := range reactors { // reactions
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				r := e.Do("POST", "/v1/streams/"+s.ID+"/reactions", u.Token,
					map[string]any{"batch_id": fmt.Sprintf("w%d-%d", w, i), "counts": map[string]int{"heart": 3, "fire": 1}})
				if r.Status/100 == 2 {
					reacted.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Duration(seconds) * time.Second)
	close(stop)
	window := time.Since(start)
	wg.Wait()
	time.Sleep(5 * time.Second) // the hold, the flushes and the slowest viewers
	open, ev1 := stat()
	delivered := float64(ev1 - ev0)
	cpu := map[string]float64{}
	var gwCPU float64
	for _, g := range gws {
		cpu[g.name] = cpuOf(g) - cpu0[g.name]
		gwCPU += cpu[g.name]
	}
	routerCPU, archCPU, chatCPU := cpuOf(router)-cpu0["router"], cpuOf(archiver)-cpu0["archiver"], cpuOf(chat)-cpu0["chat"]
	scored1, hold1 := released()
	if moderation != nil {
		t.Logf("moderation CPU %.1f s; held events released by its scored marks %.0f, by the whole hold %.0f",
			cpuOf(moderation)-cpu0["moderation"], scored1-scored0, hold1-hold0)
	} else {
		t.Logf("no moderation: held events released by the whole hold %.0f", hold1-hold0)
	}
	var vcpu float64
	for _, vp := range vps {
		vcpu += pidCPU(t, vp.cmd.Process.Pid)
	}
	vcpu -= vcpu0
	var pin, smp []time.Duration
	for _, vp := range vps {
		fmt.Fprintln(vp.in, "times")
		if !vp.out.Scan() {
			t.Fatalf("viewer process gone: %v", vp.out.Err())
		}
		var ts [][2]int64
		if err := json.Unmarshal(vp.out.Bytes(), &ts); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, x := range ts {
			at, ok := postedAt[x[0]]
			if !ok {
				continue // the warm-up's
			}
			l := time.Duration(x[1] - at.UnixNano())
			if pinned[x[0]] {
				pin = append(pin, l)
			} else {
				smp = append(smp, l)
			}
		}
		mu.Unlock()
	}
	pct := func(ls []time.Duration, q float64) time.Duration {
		if len(ls) == 0 {
			return 0
		}
		slices.Sort(ls)
		return ls[min(len(ls)-1, int(q*float64(len(ls))))].Round(time.Millisecond)
	}
	perViewerRate := delivered / float64(viewers) / window.Seconds()
	t.Logf("flood: %d viewers (%d still open) on %d gateways, %d viewer processes; %.0f comments/s appended for %s (+%d pinned), reactions %.0f req/s accepted; load %s",
		viewers, open, ngw, len(vps), float64(appended.Load())/window.Seconds(), window.Round(time.Millisecond), len(pinned),
		float64(reacted.Load())/window.Seconds(), loadAvg())
	t.Logf("each viewer read %.2f comments/s; delivered %.0f comment events (%.0f/s)", perViewerRate, delivered, delivered/window.Seconds())
	t.Logf("post-to-screen pinned p50/p99 %s / %s (n=%d); sample p50/p99 %s / %s (n=%d)",
		pct(pin, 0.5), pct(pin, 0.99), len(pin), pct(smp, 0.5), pct(smp, 0.99), len(smp))
	if delivered > 0 {
		t.Logf("gateway CPU %.1f s = %.2f µs per delivered comment; viewers' CPU %.1f s = %.2f µs per comment read; router %.1f s, archiver %.1f s, chat+live-api %.1f s over %s",
			gwCPU, gwCPU/delivered*1e6, vcpu, vcpu/delivered*1e6, routerCPU, archCPU, chatCPU, window.Round(time.Second))
	}
	for i, h := range hops {
		sum, n := total(h.metric+"_sum", h.ps...)-hop0[i][0], total(h.metric+"_count", h.ps...)-hop0[i][1]
		if n > 0 {
			t.Logf("hop %s: mean %s over %.0f", h.name, time.Duration(sum/n*1e9).Round(time.Millisecond), n)
		}
	}
	t.Logf("idle resident memory per viewer (gateways' VmRSS growth): %.0f B", float64(rss)/float64(viewers))
	// A viewer the gateway cut for falling too far behind (its socket
	// took longer than the write timeout: the machine's CPU could not
	// keep up with it) is the gateway's slow-viewer policy at work, and a
	// browser would reconnect with Last-Event-ID; these viewers do not
	// reconnect. Every other viewer must still be open.
	cut := int64(total("concord_live_gateway_slow_viewers_cut_total", gws...))
	t.Logf("viewers cut as too slow by the gateways: %d", cut)
	if open+cut != int64(viewers) {
		t.Errorf("%d of %d viewers still open after the flood, %d cut as too slow: %d lost otherwise", open, viewers, cut, int64(viewers)-open-cut)
	}
	if len(smp) == 0 || len(pin) == 0 {
		t.Errorf("timed viewers read %d pinned and %d sample comments: the tiers did not reach them", len(pin), len(smp))
	}
}
