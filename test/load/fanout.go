package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Options configures Run.
type Options struct {
	// Sizes are the session counts N. Default 1000 and 10000.
	Sizes []int
	// Systems to measure, in order. Default gateway, centrifuge and the
	// write-loop floor.
	Systems []string
	// Rounds is how many events each (system, N) run sends. Default
	// 50 for N ≤ 1000, 20 for N ≤ 10000, else 10.
	Rounds func(n int) int
	// PayloadBytes is the size of the event payload. Default 256.
	PayloadBytes int
	// PerSource is how many client sockets bind one 127.0.x.y source
	// address (the ephemeral port range holds ~28k). Default 20000.
	PerSource int
	// Progress receives one line per phase. Default: discard.
	Progress io.Writer
	// FirstRun numbers the first (system, N) run; each run takes client
	// source addresses of its own (127.10+r/250.r%250+1.x), so callers
	// that call Run repeatedly pass distinct values.
	FirstRun int
	// ClientCPUs, when set, pins the client process to these CPUs with
	// taskset(1) (a list such as "1" or "2-3"). Pin the server process to
	// the others yourself, e.g. taskset -c 0 fanout -client-cpus 1.
	ClientCPUs string
	// Mix sends the realistic event mix (mix.go) instead of one
	// PayloadBytes-sized MESSAGE_CREATE, for comparing transport
	// compressions.
	Mix bool
	// Perf counts the server's system calls and context switches during
	// the rounds with perf stat (which must be installed and allowed to
	// attach to this process).
	Perf bool
	// CompressIdle is the gateway's Config.CompressIdle (0: its default):
	// how long a stream-compressed session sends nothing before its
	// encoder goes back to the pool.
	CompressIdle time.Duration
	// IdleWait, when set, leaves the sessions idle this long after the
	// rounds and measures the heap per connection again (HeapIdlePerConn):
	// with an IdleWait past CompressIdle, the heap of idle compressed
	// sessions whose encoders were parked.
	IdleWait time.Duration
}

// Result is one (system, N) measurement.
type Result struct {
	System     string
	N          int
	Rounds     int
	Deliveries int64
	// ServerCPU is the server process's CPU time (user+system) over all
	// rounds, from just before each publish until the last client got it.
	ServerCPU time.Duration
	// CPUPerDelivery is ServerCPU / Deliveries.
	CPUPerDelivery time.Duration
	// UserPerDelivery and SysPerDelivery split CPUPerDelivery into user
	// space (the server's own code) and kernel (mostly loopback TCP,
	// which on loopback also does the receiving side's work).
	UserPerDelivery, SysPerDelivery time.Duration
	serverUser, serverSys           time.Duration
	// Send→receive latency over every delivery.
	P50, P99, Max time.Duration
	// Percentiles are the latency's percentiles 0 to 100 (nearest rank):
	// its CDF.
	Percentiles []time.Duration
	// Connect is how long N clients took to connect and subscribe.
	Connect time.Duration
	// HeapPerConn is the server's Go heap growth from start to all
	// clients subscribed (after a GC), divided by N.
	HeapPerConn int64
	// HeapActivePerConn is the same after the rounds (every session's
	// replay buffer holding the rounds' events), printed to Progress.
	HeapActivePerConn int64
	// HeapIdlePerConn is the same after Options.IdleWait without events.
	HeapIdlePerConn int64
	// Received counts the deliveries the clients recorded.
	Received int64
	// WireBytes is the WebSocket message bytes (payloads, compressed
	// where the clients asked for it) the clients received over the
	// rounds.
	WireBytes int64
	// Kernel holds perf's counts over the rounds (Options.Perf).
	Kernel map[string]int64
	// RunQueueWait is how long the server's threads waited for a CPU
	// over the rounds.
	RunQueueWait time.Duration
	// ClientCPU is the client process's CPU time from its sockets being
	// ready until the last round's last delivery: reading is work too,
	// and on a machine with few cores it bounds how soon the last socket
	// of a round is read.
	ClientCPU time.Duration
}

func (o *Options) fill() {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1000, 10000}
	}
	if len(o.Systems) == 0 {
		o.Systems = []string{SystemGateway, SystemCentrifuge, SystemWriteLoop}
	}
	if o.Rounds == nil {
		o.Rounds = func(n int) int {
			switch {
			case n <= 1000:
				return 50
			case n <= 10000:
				return 20
			default:
				return 10
			}
		}
	}
	if o.PayloadBytes == 0 {
		o.PayloadBytes = 256
	}
	if o.PerSource == 0 {
		o.PerSource = 20000
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Run measures every system at every size. Each run uses fresh servers and
// fresh client source addresses.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	opts.fill()
	limit, err := RaiseFileLimit()
	if err != nil {
		return nil, err
	}
	for _, n := range opts.Sizes {
		// One descriptor per socket in each process, plus a margin.
		if uint64(n)+100 > limit {
			return nil, fmt.Errorf("load: n=%d needs %d file descriptors per process but RLIMIT_NOFILE is %d "+
				"(raising the hard limit needs CAP_SYS_RESOURCE, e.g. ulimit -Hn 200000 as root before running)", n, n+100, limit)
		}
	}
	var out []Result
	run := opts.FirstRun
	for _, n := range opts.Sizes {
		for _, system := range opts.Systems {
			run++
			r, err := runOne(ctx, opts, system, n, run)
			if err != nil {
				return out, fmt.Errorf("load: %s n=%d: %w", system, n, err)
			}
			fmt.Fprintf(opts.Progress, "%s n=%d: %v CPU/delivery, p50 %v, p99 %v\n", system, n, r.CPUPerDelivery, r.P50, r.P99)
			out = append(out, r)
		}
	}
	return out, nil
}

func newServer(system string, opts Options) (server, error) {
	switch system {
	case SystemGateway:
		return newGatewayServer("", opts.CompressIdle)
	case SystemGatewayZlib:
		return newGatewayServer("zlib-stream", opts.CompressIdle)
	case SystemGatewayZstd:
		return newGatewayServer("zstd-stream", opts.CompressIdle)
	case SystemCentrifuge:
		return newCentrifugeServer()
	case SystemWriteLoop:
		return newWriteLoopServer()
	}
	return nil, fmt.Errorf("load: unknown system %q", system)
}

// sources returns the client source addresses of run number run.
func sources(run, n, perSource int) []string {
	k := (n + perSource - 1) / perSource
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("127.%d.%d.%d", 10+run/250, run%250+1, i+1)
	}
	return out
}

func runOne(ctx context.Context, opts Options, system string, n, run int) (Result, error) {
	res := Result{System: system, N: n, Rounds: opts.Rounds(n)}
	// Two collections: what the previous run left in a sync.Pool (the
	// encoders of its closed compressed sessions) survives one, and would
	// make this run's heap growth negative when freed during it.
	runtime.GC()
	runtime.GC()
	heap0 := heapInUse()
	srv, err := newServer(system, opts)
	if err != nil {
		return res, err
	}
	defer srv.close()

	exe, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe)
	if opts.ClientCPUs != "" {
		// The clients run on CPUs of their own, so that the server's
		// latency and CPU are not the clients' scheduling.
		cmd = exec.CommandContext(ctx, "taskset", "-c", opts.ClientCPUs, exe)
	}
	spin := "0"
	if opts.ClientCPUs != "" {
		spin = "1"
	}
	cmd.Env = append(os.Environ(),
		envRole+"=client", envSystem+"="+system, envURL+"="+srv.url(),
		envN+"="+strconv.Itoa(n), envRounds+"="+strconv.Itoa(res.Rounds),
		envSources+"="+strings.Join(sources(run, n, opts.PerSource), ","), envSpin+"="+spin)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start clients: %w", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(prefix string, timeout time.Duration) (string, error) {
		return expectLine(lines, prefix, timeout)
	}

	l, err := expect("ready", 10*time.Minute)
	if err != nil {
		return res, err
	}
	clientCPU0 := lineCPU(l)
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = srv.ready(readyCtx, n)
	cancel()
	if err != nil {
		return res, err
	}
	res.Connect = time.Since(start)
	runtime.GC()
	res.HeapPerConn = (heapInUse() - heap0) / int64(n)
	fmt.Fprintf(opts.Progress, "%s n=%d: connected in %v, %d heap bytes per connection\n", system, n, res.Connect.Round(time.Millisecond), res.HeapPerConn)

	pad := strings.Repeat("x", max(opts.PayloadBytes-100, 1))
	sent := make([]int64, res.Rounds+1)
	var perf *perfStat
	if opts.Perf {
		if perf, err = startPerf(); err != nil {
			return res, err
		}
		if err := perf.command("enable"); err != nil {
			_, _ = perf.stop()
			return res, err
		}
	}
	wait0 := runQueueDelay()
	for round := 1; round <= res.Rounds; round++ {
		u0, s0 := cpuTime()
		sent[round] = time.Now().UnixNano()
		if tp, ok := srv.(typedPublisher); ok && opts.Mix {
			tp.publishEvent(mixEvent(round, sent[round]))
		} else if opts.Mix {
			_, payload := mixEvent(round, sent[round])
			srv.publish(payload)
		} else {
			srv.publish(fmt.Appendf(nil, `{"round":%d,"ts":%d,"channel_id":"41771983423143937","content":"%s"}`,
				round, sent[round], pad))
		}
		l, err := expect("round "+strconv.Itoa(round)+" ", time.Minute)
		if err != nil {
			return res, err
		}
		res.ClientCPU = lineCPU(l) - clientCPU0
		u1, s1 := cpuTime()
		res.serverUser += u1 - u0
		res.serverSys += s1 - s0
	}
	res.RunQueueWait = runQueueDelay() - wait0
	if perf != nil {
		err := perf.command("disable")
		counts, serr := perf.stop()
		if err = errors.Join(err, serr); err != nil {
			return res, err
		}
		res.Kernel = counts
	}
	runtime.GC()
	res.HeapActivePerConn = (heapInUse() - heap0) / int64(n)
	fmt.Fprintf(opts.Progress, "%s n=%d: after %d rounds, %d heap bytes per connection\n", system, n, res.Rounds, res.HeapActivePerConn)
	if opts.IdleWait > 0 {
		// Idle time is what is measured here: the sessions send nothing
		// for IdleWait, then the heap is read again. Two collections, since
		// a sync.Pool's victim cache outlives one.
		time.Sleep(opts.IdleWait)
		runtime.GC()
		runtime.GC()
		res.HeapIdlePerConn = (heapInUse() - heap0) / int64(n)
		fmt.Fprintf(opts.Progress, "%s n=%d: idle %v, %d heap bytes per connection\n", system, n, opts.IdleWait, res.HeapIdlePerConn)
	}
	res.ServerCPU = res.serverUser + res.serverSys
	res.Deliveries = int64(n) * int64(res.Rounds)
	res.CPUPerDelivery = res.ServerCPU / time.Duration(res.Deliveries)
	res.UserPerDelivery = res.serverUser / time.Duration(res.Deliveries)
	res.SysPerDelivery = res.serverSys / time.Duration(res.Deliveries)

	// Clients that cannot read the send time out of a compressed payload
	// get it here, by round.
	for round := 1; round <= res.Rounds; round++ {
		if _, err := fmt.Fprintf(stdin, "ts %d %d\n", round, sent[round]); err != nil {
			return res, fmt.Errorf("send times to clients: %w", err)
		}
	}
	_ = stdin.Close()
	l, err = expect("stats", 5*time.Minute)
	if err != nil {
		return res, err
	}
	var p50, p99, mx, ccpu int64
	if _, err := fmt.Sscanf(l, "stats %d %d %d %d %d %d", &res.Received, &p50, &p99, &mx, &ccpu, &res.WireBytes); err != nil {
		return res, fmt.Errorf("stats %q: %w", l, err)
	}
	res.P50, res.P99, res.Max = time.Duration(p50), time.Duration(p99), time.Duration(mx)
	if l, err = expect("cdf", time.Minute); err != nil {
		return res, err
	}
	for _, f := range strings.Fields(l)[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return res, fmt.Errorf("cdf %q: %w", l, err)
		}
		res.Percentiles = append(res.Percentiles, time.Duration(v))
	}
	return res, nil
}

// lineCPU reads the "cpu=<ns>" field the client ends its ready and round
// lines with; 0 if it is missing.
func lineCPU(l string) time.Duration {
	_, v, ok := strings.Cut(l, " cpu=")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return time.Duration(n)
}

// heapInUse is the Go heap in use, stacks included.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// WriteTable prints results, with each system's CPU per delivery as a
// ratio to the gateway's at the same N.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\trounds\tdeliveries\tCPU/delivery\tuser\tsys\tvs gateway\tp50\tp99\tmax\tconnect\theap/conn\t")
	gw := map[int]time.Duration{}
	for _, r := range results {
		if r.System == SystemGateway {
			gw[r.N] = r.CPUPerDelivery
		}
	}
	for _, r := range results {
		ratio := "-"
		if g := gw[r.N]; g > 0 {
			ratio = fmt.Sprintf("%.2fx", float64(r.CPUPerDelivery)/float64(g))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\t%v\t%v\t%s\t%v\t%v\t%v\t%v\t%d B\t\n", r.System, r.N, r.Rounds, r.Received,
			r.CPUPerDelivery, r.UserPerDelivery, r.SysPerDelivery, ratio, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond),
			r.Max.Round(time.Microsecond), r.Connect.Round(time.Millisecond), r.HeapPerConn)
	}
	return tw.Flush()
}

// WriteWireTable writes bytes on the wire and CPU per delivery of each
// result, against the uncompressed gateway's at the same N: the
// transport-compression comparison (run with Options.Mix).
func WriteWireTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\twire bytes/delivery\tvs none\tCPU/delivery\tvs none\t")
	base := map[int]Result{}
	for _, r := range results {
		if r.System == SystemGateway {
			base[r.N] = r
		}
	}
	for _, r := range results {
		per := float64(r.WireBytes) / float64(max(r.Deliveries, 1))
		wr, cr := "-", "-"
		if b, ok := base[r.N]; ok && b.WireBytes > 0 && b.CPUPerDelivery > 0 {
			wr = fmt.Sprintf("%.3fx", per/(float64(b.WireBytes)/float64(max(b.Deliveries, 1))))
			cr = fmt.Sprintf("%.2fx", float64(r.CPUPerDelivery)/float64(b.CPUPerDelivery))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%v\t%s\t\n", r.System, r.N, per, wr, r.CPUPerDelivery, cr)
	}
	return tw.Flush()
}

// WriteHeapTable writes the heap per connection after connecting, after
// the rounds and after Options.IdleWait without events, with the idle
// figure as a ratio to the one after the rounds (run with IdleWait).
func WriteHeapTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\theap/conn connected\tafter rounds\tafter idle\tidle / after rounds\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d B\t%d B\t%d B\t%.3fx\t\n", r.System, r.N, r.HeapPerConn, r.HeapActivePerConn, r.HeapIdlePerConn,
			float64(r.HeapIdlePerConn)/float64(max(r.HeapActivePerConn, 1)))
	}
	return tw.Flush()
}
