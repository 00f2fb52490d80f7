//go:build integration && storm

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/concord-chat/concord/test/load"
)

// Flags of TestReconnectStorm (go test -tags 'integration storm' ...
// -args -storm.n=...).
var (
	stormN       = flag.Int("storm.n", 10000, "sessions on the gateway node that is killed")
	stormUsers   = flag.Int("storm.users", 200, "users the sessions belong to (10 per guild)")
	stormRate    = flag.Float64("storm.rate", 500, "--identify-rate of the throttled gateway node (identifies per second)")
	stormBurst   = flag.Int("storm.burst", 0, "--identify-burst of the throttled gateway node (0: the rate)")
	stormPerProc = flag.Int("storm.per-proc", 8000, "most sessions per client process (each load balancer process holds two descriptors per session; the hard limit is 20,000)")
	stormTimeout = flag.Duration("storm.timeout", 5*time.Minute, "how long every session has to come back after a kill")
	stormPlot    = flag.String("storm.plot", "", "also draw each storm's timeline (sessions back against time since the kill) to this SVG file")
)

// stormResult is one storm's measurements.
type stormResult struct {
	name     string
	n        int
	allBack  time.Duration   // kill → the last session's READY/RESUMED
	p50, p99 time.Duration   // kill → each session's READY/RESUMED
	backs    []time.Duration // kill → each session's READY/RESUMED, sorted
	report   stormReport     // summed over the client processes
	refused  float64         // identifies the survivor answered op 9 for its throttle
	// lookup, subscribe and store are histogram deltas on the survivor
	// over the storm.
	lookup, subscribe, store histogram
	// guildStore is the Cassandra statement latency on the guild node
	// (subscriptions load guild state there).
	guildStore histogram
	sessions   float64 // concord_gateway_sessions on the survivor after
	// listenOverflows is the machine's TcpExt ListenOverflows over the
	// storm: connections dropped because an accept queue was full.
	listenOverflows int64
}

// TestReconnectStorm is the reconnect storm: kill -9
// a gateway node holding N sessions and measure how long until every
// session is back and the p99 of the lookups identify makes in the shared
// store, without and then with the identify throttle, in the same run.
//
// One guild+api node and gateway nodes behind a TCP load balancer (one
// balancer process per client process, each sending new connections to
// the gateways whose /readyz is 200). The N sessions (clients in child
// processes) all live on gateway-1. Storm 1: gateway-2 (no throttle)
// joins, gateway-1 is killed; every client's RESUME reaches gateway-2,
// which does not know the session (op 9), waits 1-5 s and identifies.
// Storm 2: gateway-3 (--identify-rate) joins, gateway-2 is killed; the
// same again, with identifies over the rate answered op 9 and retried
// after 1-5 s.
//
// It asserts that every session came back after each kill, that no
// session saw a close code that forbids reconnecting, that the survivor
// holds at least N sessions, and that the throttle refused identifies
// when the storm outran it.
//
//	go test -tags 'integration storm' ./test/cluster/ -run TestReconnectStorm -v -timeout 30m -args -storm.n=10000
func TestReconnectStorm(t *testing.T) {
	n := *stormN
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "storm")
	key := fmt.Sprintf("%064x", rand.Uint64())
	common := []string{
		"--rate-limits=false", // the test sends faster than REST allows
		"--registry=etcd://" + strings.TrimPrefix(env.endpoint, "http://"),
		"--store=cassandra://" + env.cass + "/" + env.ks + "?rf=1",
		"--server-key=" + key,
		"--lease-ttl=" + leaseTTL.String(),
		"--retry-interval=500ms",
		"--data-dir=" + t.TempDir(),
		"--log-level=warn",
	}
	guildNode := startNode(t, "guild-1", freeAddr(t), append([]string{"--roles=guild,api", "--grpc=" + freeAddr(t), "--worker=1"}, common...)...)
	guildNode.waitReady(t, time.Now().Add(45*time.Second))
	api := rest{addr: guildNode.http, client: &http.Client{Timeout: 30 * time.Second}}
	tokens := seedStormUsers(t, api, *stormUsers)
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte(strings.Join(tokens, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d users in %d guilds after %v", len(tokens), (len(tokens)+9)/10, time.Since(start).Round(time.Millisecond))

	gwAddrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	gateway := func(i int, extra ...string) *proc {
		name := fmt.Sprintf("gateway-%d", i+1)
		args := append([]string{"--roles=gateway", "--grpc=" + freeAddr(t), "--worker=" + strconv.Itoa(i+2)}, common...)
		p := startNode(t, name, gwAddrs[i], append(args, extra...)...)
		p.waitReady(t, time.Now().Add(45*time.Second))
		return p
	}

	procs := (n + *stormPerProc - 1) / *stormPerProc
	lbs := make([]*stormChild, procs)
	for p := range lbs {
		lbs[p] = startStormChild(t, fmt.Sprintf("lb-%d", p), []string{
			stormEnvRole + "=lb",
			stormEnvBackends + "=" + strings.Join(gwAddrs, ","),
			stormEnvListen + "=127.0.0.1:0",
			stormEnvSources + "=" + sourceAddrs(100+8*p, 8),
		})
	}
	stormBalancers = lbs
	lbAddrs := make([]string, procs)
	for p, lb := range lbs {
		lbAddrs[p] = strings.TrimPrefix(lb.expect(t, "listening ", time.Now().Add(30*time.Second)), "listening ")
	}
	gw1 := gateway(0)
	awaitHealthy(t, lbs, gwAddrs[:1])

	clients := make([]*stormChild, procs)
	for p := range clients {
		lo, hi := p*n/procs, (p+1)*n/procs
		clients[p] = startStormChild(t, fmt.Sprintf("clients-%d", p), []string{
			stormEnvRole + "=client",
			stormEnvURL + "=ws://" + lbAddrs[p] + "/gateway?v=10&encoding=json",
			stormEnvTokens + "=" + tokenFile,
			stormEnvOffset + "=" + strconv.Itoa(lo),
			stormEnvCount + "=" + strconv.Itoa(hi-lo),
			stormEnvSources + "=" + sourceAddrs(10+8*p, 8),
		})
	}
	seedStart := time.Now()
	awaitAll(t, clients, "ready", time.Now().Add(10*time.Minute), "identified ", "initial identifies")
	t.Logf("%d sessions identified on gateway-1 in %v (%d client and %d balancer processes)",
		n, time.Since(seedStart).Round(time.Millisecond), procs, procs)

	var results []stormResult
	// Storm 1: no throttle.
	gw2 := gateway(1)
	awaitHealthy(t, lbs, gwAddrs[:2])
	results = append(results, runStorm(t, 1, "no throttle", n, clients, gw1, gw2, guildNode))
	// Storm 2: the survivor throttles identifies.
	throttle := []string{"--identify-rate=" + strconv.FormatFloat(*stormRate, 'f', -1, 64)}
	if *stormBurst > 0 {
		throttle = append(throttle, "--identify-burst="+strconv.Itoa(*stormBurst))
	}
	gw3 := gateway(2, throttle...)
	awaitHealthy(t, lbs, gwAddrs[1:3])
	thr := runStorm(t, 2, fmt.Sprintf("identify throttle %v/s", *stormRate), n, clients, gw2, gw3, guildNode)
	results = append(results, thr)

	burst := float64(*stormBurst)
	if burst <= 0 {
		burst = *stormRate
	}
	// Clients identify 1-5 s after the kill: if the rate cannot admit N
	// in 5 s, the throttle must have refused some.
	if float64(n) > 5**stormRate+burst && thr.refused == 0 {
		t.Errorf("throttled storm: no identify refused, but %d sessions cannot pass %v/s (burst %v) within 5 s", n, *stormRate, burst)
	}
	logStormTable(t, results)
	if *stormPlot != "" {
		if err := writeStormPlot(*stormPlot, n, results); err != nil {
			t.Error(err)
		}
	}
	for _, c := range clients {
		c.stdin.Close()
	}
	t.Logf("total %v", time.Since(start).Round(time.Second))
}

// runStorm arms the clients, kills victim, waits until every session is
// back and returns the measurements.
func runStorm(t *testing.T, k int, name string, n int, clients []*stormChild, victim, survivor, guildNode *proc) stormResult {
	t.Helper()
	hists := []string{"concord_cluster_identify_lookup_duration_seconds", "concord_cluster_identify_subscribe_duration_seconds", "concord_store_cassandra_query_duration_seconds"}
	scalars := []string{"concord_cluster_identify_refused_total", "concord_gateway_sessions"}
	before, beforeVals, err := scrape(survivor.http, hists, scalars, "")
	if err != nil {
		t.Fatal(err)
	}
	guildBefore, _, err := scrape(guildNode.http, hists[2:], nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		c.send(t, fmt.Sprintf("storm %d", k))
	}
	awaitAll(t, clients, fmt.Sprintf("armed %d", k), time.Now().Add(30*time.Second), "", "")
	overflows := listenOverflows(t)
	killAt := time.Now()
	victim.kill()
	t.Logf("storm %d (%s): killed %s (-9) holding %d sessions; %s takes them", k, name, victim.name, n, survivor.name)
	awaitAll(t, clients, fmt.Sprintf("allback %d", k), time.Now().Add(*stormTimeout), fmt.Sprintf("back %d ", k), "sessions back")
	took := time.Since(killAt)
	overflows = listenOverflows(t) - overflows
	after, afterVals, err := scrape(survivor.http, hists, scalars, "")
	if err != nil {
		t.Fatal(err)
	}
	guildAfter, _, err := scrape(guildNode.http, hists[2:], nil, "")
	if err != nil {
		t.Fatal(err)
	}
	res := stormResult{name: name, n: n, report: stormReport{Closes: map[int]int{}},
		lookup: after[hists[0]].delta(before[hists[0]]), subscribe: after[hists[1]].delta(before[hists[1]]),
		store: after[hists[2]].delta(before[hists[2]]), guildStore: guildAfter[hists[2]].delta(guildBefore[hists[2]]), refused: afterVals[scalars[0]] - beforeVals[scalars[0]], sessions: afterVals[scalars[1]],
		listenOverflows: overflows}
	var backs []int64
	for _, c := range clients {
		c.send(t, fmt.Sprintf("report %d", k))
		line := c.expect(t, fmt.Sprintf("report %d ", k), time.Now().Add(30*time.Second))
		var r stormReport
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, fmt.Sprintf("report %d ", k))), &r); err != nil {
			t.Fatalf("%s: report: %v", c.name, err)
		}
		backs = append(backs, r.BackAt...)
		res.report.Resumed += r.Resumed
		res.report.Identified += r.Identified
		res.report.InvalidSessions += r.InvalidSessions
		res.report.Identifies += r.Identifies
		res.report.DialFailures += r.DialFailures
		res.report.ExtraDrops += r.ExtraDrops
		for code, m := range r.Closes {
			res.report.Closes[code] += m
		}
		for e, m := range r.DialErrors {
			if res.report.DialErrors == nil {
				res.report.DialErrors = map[string]int{}
			}
			res.report.DialErrors[e] += m
		}
	}
	if len(backs) != n {
		t.Fatalf("storm %d: %d of %d sessions came back", k, len(backs), n)
	}
	slices.Sort(backs)
	since := func(ns int64) time.Duration { return time.Duration(ns - killAt.UnixNano()) }
	res.allBack = since(backs[len(backs)-1])
	for _, b := range backs {
		res.backs = append(res.backs, since(b))
	}
	res.p50, res.p99 = since(backs[pctIndex(len(backs), 50)]), since(backs[pctIndex(len(backs), 99)])
	for code, m := range res.report.Closes {
		switch {
		case nonResumableCloses[code]:
			t.Errorf("storm %d: %d sessions closed with %d, after which a client must not reconnect", k, m, code)
		case !expectedStormCloses[code]:
			t.Errorf("storm %d: %d sessions closed with %d; a storm should only show 1006 (the dead node's sockets) and 4009 (no READY within the identify timeout while throttled)", k, m, code)
		}
	}
	if res.sessions < float64(n) {
		t.Errorf("storm %d: %s holds %v sessions after the storm, want at least %d", k, survivor.name, res.sessions, n)
	}
	t.Logf("storm %d (%s): all %d back after %v (waited %v); resumed %d, identified %d, op 9 %d, identifies sent %d, throttled %v, "+
		"connects without HELLO %d %v, accept queue overflows %d, sockets lost again after READY %d",
		k, name, n, res.allBack.Round(time.Millisecond), took.Round(time.Millisecond), res.report.Resumed, res.report.Identified,
		res.report.InvalidSessions, res.report.Identifies, res.refused, res.report.DialFailures, res.report.DialErrors, res.listenOverflows, res.report.ExtraDrops)
	return res
}

// expectedStormCloses are the close codes a storm may show: 1006, the
// balancer dropping the sockets of the dead node, and 4009, a socket that
// sent no successful IDENTIFY within the gateway's identify timeout (30 s)
// because the throttle kept answering op 9; both reconnect.
var expectedStormCloses = map[int]bool{1006: true, 4009: true}

// listenOverflows reads TcpExt ListenOverflows from /proc/net/netstat
// (the whole machine; 0 where the file is missing).
func listenOverflows(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		t.Logf("no /proc/net/netstat: %v", err)
		return 0
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j, name := range names {
			if name == "ListenOverflows" && j < len(vals) {
				v, _ := strconv.ParseInt(vals[j], 10, 64)
				return v
			}
		}
	}
	return 0
}

// pctIndex is the nearest-rank index of the p-th percentile of n values.
func pctIndex(n, p int) int { return min(max((n*p+99)/100-1, 0), n-1) }

// logStormTable prints the results side by side, with the throttled run
// as a ratio of the unthrottled one.
func logStormTable(t *testing.T, rs []stormResult) {
	ms := func(s float64) string {
		if math.IsNaN(s) {
			return "-"
		}
		return strconv.FormatFloat(s*1000, 'f', 1, 64) + " ms"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| storm | N | all back | per session p50 | p99 | identify lookups | lookup p50 | lookup p99 | store statements | store p99 | subscribe p99 | guild node store p99 | op 9 | identifies sent | throttled | resumed | closes | connects without HELLO | accept queue overflows |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %.1f s | %.1f s | %.1f s | %.0f | %s | %s | %.0f | %s | %s | %s | %d | %d | %.0f | %d | %v | %d | %d |\n",
			r.name, r.n, r.allBack.Seconds(), r.p50.Seconds(), r.p99.Seconds(), r.lookup.total(), ms(r.lookup.quantile(0.5)), ms(r.lookup.quantile(0.99)),
			r.store.total(), ms(r.store.quantile(0.99)), ms(r.subscribe.quantile(0.99)), ms(r.guildStore.quantile(0.99)), r.report.InvalidSessions, r.report.Identifies, r.refused, r.report.Resumed, r.report.Closes, r.report.DialFailures, r.listenOverflows)
	}
	if len(rs) == 2 {
		a, c := rs[0], rs[1]
		fmt.Fprintf(&b, "\nthrottled / unthrottled: all back ×%.2f, per-session p99 ×%.2f, lookup p99 ×%.2f, store p99 ×%.2f, subscribe p99 ×%.2f, guild node store p99 ×%.2f\n",
			c.allBack.Seconds()/a.allBack.Seconds(), c.p99.Seconds()/a.p99.Seconds(),
			c.lookup.quantile(0.99)/a.lookup.quantile(0.99), c.store.quantile(0.99)/a.store.quantile(0.99),
			c.subscribe.quantile(0.99)/a.subscribe.quantile(0.99), c.guildStore.quantile(0.99)/a.guildStore.quantile(0.99))
	}
	t.Log(b.String())
}

// seedStormUsers registers users through the API, 10 per guild (the first
// creates it, the others join by invite), and returns their tokens.
func seedStormUsers(t *testing.T, api rest, users int) []string {
	t.Helper()
	tokens := make([]string, users)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for g := 0; g*10 < users; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var code string
			for i := g * 10; i < min(users, g*10+10); i++ {
				tokens[i] = register(t, api, fmt.Sprintf("storm%d", i))
				if i == g*10 {
					guildID := createGuild(t, api, tokens[i], fmt.Sprintf("storm %d", g))
					var chans []struct {
						ID   string `json:"id"`
						Type int    `json:"type"`
					}
					api.must(t, tokens[i], "GET", "/guilds/"+guildID+"/channels", nil, &chans)
					for _, c := range chans {
						if c.Type == 0 {
							code = newInvite(t, api, tokens[i], c.ID)
							break
						}
					}
					if code == "" {
						t.Errorf("guild %s has no text channel", guildID)
						return
					}
					continue
				}
				api.must(t, tokens[i], "POST", "/invites/"+code, map[string]any{}, nil)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return tokens
}

// sourceAddrs lists count loopback addresses from 127.0.0.first.
func sourceAddrs(first, count int) string {
	s := make([]string, count)
	for i := range s {
		s[i] = "127.0.0." + strconv.Itoa(first+i)
	}
	return strings.Join(s, ",")
}

// stormBalancers are the running balancer processes awaitAll watches.
var stormBalancers []*stormChild

// stormChild is a client or balancer process (the test binary).
type stormChild struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}

	mu      sync.Mutex
	healthy string // balancers: the last "healthy" line
	changed chan struct{}
	last    []string // the last lines, for failures
}

// startStormChild re-executes the test binary with env.
func startStormChild(t *testing.T, name string, env []string) *stormChild {
	t.Helper()
	c := &stormChild{name: name, lines: make(chan string, 1024), done: make(chan struct{}), changed: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = os.Stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.last = append(c.last, line)
			if len(c.last) > 20 {
				c.last = c.last[1:]
			}
			if h, ok := strings.CutPrefix(line, "healthy "); ok || line == "healthy" {
				c.healthy = h
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
				continue
			}
			c.mu.Unlock()
			c.lines <- line
		}
		_ = c.cmd.Wait()
	}()
	t.Cleanup(func() {
		c.stdin.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *stormChild) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
}

func (c *stormChild) tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.last, "\n")
}

// expect returns the next line starting with prefix; other lines are
// dropped, an "error" line or the process exiting fails the test.
func (c *stormChild) expect(t *testing.T, prefix string, deadline time.Time) string {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case line := <-c.lines:
			if strings.HasPrefix(line, "error") {
				t.Fatalf("%s: %s", c.name, line)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-c.done:
			t.Fatalf("%s exited waiting for %q; last lines:\n%s", c.name, prefix, c.tail())
		case <-timer.C:
			t.Fatalf("%s: no %q in time; last lines:\n%s", c.name, prefix, c.tail())
		}
	}
}

// awaitAll waits for line from every child, logging every 5 s the sum of
// the last "<progress><n>" lines (progress "" logs nothing). A balancer
// process exiting meanwhile fails the test.
func awaitAll(t *testing.T, cs []*stormChild, line string, deadline time.Time, progress, what string) {
	t.Helper()
	got := make([]bool, len(cs))
	counts := make([]int, len(cs))
	left := len(cs)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	// One select over every child's lines and exit, every balancer's
	// exit, the progress tick and the deadline.
	var cases []reflect.SelectCase
	recv := func(ch any) {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	for _, c := range cs {
		recv(c.lines)
		recv(c.done)
	}
	for _, lb := range stormBalancers {
		recv(lb.done)
	}
	recv(tick.C)
	recv(timer.C)
	nc, nlb := len(cs), len(stormBalancers)
	for left > 0 {
		i, v, _ := reflect.Select(cases)
		switch {
		case i < 2*nc && i%2 == 0:
			c, l := cs[i/2], v.String()
			switch {
			case strings.HasPrefix(l, "error"):
				t.Fatalf("%s: %s", c.name, l)
			case l == line && !got[i/2]:
				got[i/2] = true
				left--
			case progress != "" && strings.HasPrefix(l, progress):
				counts[i/2], _ = strconv.Atoi(strings.TrimPrefix(l, progress))
			}
		case i < 2*nc:
			c := cs[i/2]
			t.Fatalf("%s exited waiting for %q; last lines:\n%s", c.name, line, c.tail())
		case i < 2*nc+nlb:
			lb := stormBalancers[i-2*nc]
			t.Fatalf("%s exited; last lines:\n%s", lb.name, lb.tail())
		case i == 2*nc+nlb:
			if progress != "" {
				sum := 0
				for _, n := range counts {
					sum += n
				}
				t.Logf("  %s: %d", what, sum)
			}
		default:
			t.Fatalf("no %q from every process in time (%d left)", line, left)
		}
	}
}

// awaitHealthy waits until every balancer's healthy set is exactly want.
func awaitHealthy(t *testing.T, lbs []*stormChild, want []string) {
	t.Helper()
	w := strings.Join(want, ",")
	deadline := time.After(30 * time.Second)
	for _, lb := range lbs {
		for {
			lb.mu.Lock()
			h, ch := lb.healthy, lb.changed
			lb.mu.Unlock()
			if h == w {
				break
			}
			select {
			case <-ch:
			case <-lb.done:
				t.Fatalf("%s exited; last lines:\n%s", lb.name, lb.tail())
			case <-deadline:
				t.Fatalf("%s: healthy backends %q, want %q", lb.name, h, w)
			}
		}
	}
}

// writeStormPlot draws the storms' timelines at path: for each storm, how
// many of the n sessions were back (READY or RESUMED) against the time
// since the kill, one point per session.
func writeStormPlot(path string, n int, results []stormResult) error {
	var lines []load.Line
	for _, r := range results {
		pts := plotter.XYs{{X: 0, Y: 0}}
		for i, b := range r.backs {
			pts = append(pts, plotter.XY{X: b.Seconds(), Y: float64(i + 1)})
		}
		lines = append(lines, load.Line{Name: r.name, Points: pts})
	}
	return load.WriteLines(path, load.Chart{Title: fmt.Sprintf("Reconnect storm: %d sessions after kill -9 of their gateway", n),
		X: "seconds since the kill", Y: "sessions back (READY or RESUMED)"}, lines)
}
