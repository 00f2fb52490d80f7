// Command fanout measures one event to N sessions on one Concord gateway
// node against a centrifuge broadcast to the same number of clients, and
// prints a table. See package load.
//
//	go run ./test/load/cmd/fanout -n 1000,10000,50000 -plot docs/plots/fanout-cpu.svg -cdf docs/plots/fanout-latency-cdf.svg
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/concord-chat/concord/test/load"
)

func main() {
	load.MaybeRunClient()
	sizes := flag.String("n", "1000,10000", "comma-separated session counts")
	systems := flag.String("systems", strings.Join([]string{load.SystemGateway, load.SystemCentrifuge, load.SystemWriteLoop}, ","), "systems to measure")
	rounds := flag.Int("rounds", 0, "events per run (0: 50 up to 1k sessions, 20 up to 10k, else 10)")
	payload := flag.Int("payload", 256, "payload bytes")
	perSource := flag.Int("per-source", 20000, "client sockets per 127.x.y.z source address")
	clientCPUs := flag.String("client-cpus", os.Getenv("FANOUT_CLIENT_CPUS"), "pin the client process to these CPUs with taskset (e.g. 1; run the server under taskset -c 0); env FANOUT_CLIENT_CPUS")
	cpuprofile := flag.String("cpuprofile", "", "write the server process's CPU profile to this file")
	mix := flag.Bool("mix", false, "send the realistic event mix (MESSAGE_CREATE with member or embed, PRESENCE_UPDATE, TYPING_START, GUILD_MEMBER_LIST_UPDATE) instead of one -payload MESSAGE_CREATE, and print wire bytes per delivery; for -systems concord-gateway,concord-gateway-zlib-stream,concord-gateway-zstd-stream")
	perf := flag.Bool("perf", false, "count the server's system calls and context switches during the rounds with perf stat, and print them per delivery with the run-queue wait per round")
	compressIdle := flag.Duration("compress-idle", 0, "the gateway's idle time before a zlib-stream or zstd-stream session's encoder goes back to the pool (0: its default, 10s)")
	idleWait := flag.Duration("idle-wait", 0, "after the rounds, leave the sessions idle this long and print the heap per connection again (idle compressed sessions' encoders parked when it passes -compress-idle)")
	plotFile := flag.String("plot", "", "also draw CPU per delivery against N for each system to this SVG file")
	cdfFile := flag.String("cdf", "", "also draw each run's send→receive latency CDF to this SVG file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fanout: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	opts := load.Options{Systems: strings.Split(*systems, ","), PayloadBytes: *payload, PerSource: *perSource, Progress: os.Stderr, ClientCPUs: *clientCPUs, Mix: *mix, Perf: *perf, CompressIdle: *compressIdle, IdleWait: *idleWait}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fanout: -n:", err)
			os.Exit(2)
		}
		opts.Sizes = append(opts.Sizes, n)
	}
	if *rounds > 0 {
		opts.Rounds = func(int) int { return *rounds }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results, err := load.Run(ctx, opts)
	if len(results) > 0 {
		_ = load.WriteTable(os.Stdout, results)
		if *mix {
			fmt.Println()
			_ = load.WriteWireTable(os.Stdout, results)
		}
		if *idleWait > 0 {
			fmt.Println()
			_ = load.WriteHeapTable(os.Stdout, results)
		}
		fmt.Println()
		_ = load.WriteKernelTable(os.Stdout, results)
		if *plotFile != "" {
			if perr := load.WritePlot(*plotFile, results); perr != nil {
				fmt.Fprintln(os.Stderr, "fanout:", perr)
			}
		}
		if *cdfFile != "" {
			if perr := load.WriteCDFPlot(*cdfFile, results); perr != nil {
				fmt.Fprintln(os.Stderr, "fanout:", perr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		stop()
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}
