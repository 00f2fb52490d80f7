//go:build livekit

// Command lkbench compares Concord's SFU with LiveKit server v1.13.5 in
// one run, driven by the same pion WebRTC clients.
//
// The scenario is R rooms, each with S speakers and L listeners: every
// speaker sends a 120-byte Opus-sized RTP packet every 20 ms and
// subscribes to the room's other speakers (a group call); every listener
// subscribes to all S. Each server runs in its own process
// (GOMAXPROCS=1, pinned to -server-cpus); the clients run in -procs driver
// processes of their own (GOMAXPROCS=1 each, pinned to -driver-cpus), so
// the driver's SRTP work neither shares a Go scheduler with the server nor
// runs on its CPU. The servers alternate, -pairs times (Concord, LiveKit,
// Concord, LiveKit, ...), so drift in the machine's load shows per pair.
//
// Per window: the packets the clients received, divided by the server
// process's CPU (user + system from /proc/<pid>/stat) over the same
// window: forwarded packets per second per core. Counting starts only
// after every client has received a packet on every track it expects
// (the paths are open).
//
//	CGO_ENABLED=0 GOBIN=~/.cache/concord/livekit/bin go install github.com/livekit/livekit-server/cmd/server@v1.13.5
//	cd test/voice/lkbench && go build -tags livekit -o /tmp/lkbench . && cd /tmp
//	/tmp/lkbench -rooms 50 -speakers 5 -listeners 0 -pairs 3
//	/tmp/lkbench -rooms 1 -speakers 1 -listeners 500 -pairs 3
//
// It is its own module so that the LiveKit client SDK stays out of
// Concord's dependencies.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		var err error
		switch os.Args[1] {
		case "concord-sfu":
			err = serveConcord()
		case "drive":
			err = drive(os.Args[2:])
		case "pinned":
			err = execPinned(os.Args[2:])
		default:
			goto bench
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
			os.Exit(1)
		}
		return
	}
bench:
	home, _ := os.UserHomeDir()
	var o options
	flag.IntVar(&o.rooms, "rooms", 1, "rooms (calls)")
	flag.IntVar(&o.speakers, "speakers", 1, "speakers per room: each sends and subscribes to the room's other speakers")
	flag.IntVar(&o.listeners, "listeners", 20, "listeners per room: each subscribes to the room's speakers")
	flag.IntVar(&o.pairs, "pairs", 1, "alternating Concord, LiveKit windows")
	flag.IntVar(&o.procs, "procs", 2, "driver processes the clients are spread over (GOMAXPROCS=1 each)")
	flag.IntVar(&o.joiners, "join-concurrency", 8, "concurrent joins per driver process")
	flag.DurationVar(&o.dur, "duration", 10*time.Second, "measured window")
	flag.StringVar(&o.serverCPUs, "server-cpus", "1", "CPU list the server process is pinned to (sched_setaffinity); empty: not pinned")
	flag.StringVar(&o.driverCPUs, "driver-cpus", "0", "CPU list the driver processes are pinned to; empty: not pinned")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of Concord's SFU over each measured window to FILE.<pair>")
	flag.StringVar(&o.lk, "livekit", filepath.Join(home, ".cache/concord/livekit/bin/server"), "livekit-server v1.13.5 binary")
	flag.BoolVar(&o.only, "concord-only", false, "measure Concord only (for profiling)")
	flag.Parse()
	if o.rooms < 1 || o.speakers < 1 || o.listeners < 0 || o.procs < 1 || o.pairs < 1 {
		fmt.Fprintln(os.Stderr, "lkbench: -rooms, -speakers, -procs, -pairs must be ≥ 1, -listeners ≥ 0")
		os.Exit(2)
	}
	if err := bench(o); err != nil {
		fmt.Fprintln(os.Stderr, "lkbench:", err)
		os.Exit(1)
	}
}

type options struct {
	rooms, speakers, listeners, pairs, procs, joiners int
	dur                                               time.Duration
	serverCPUs, driverCPUs, cpuprofile, lk            string
	only                                              bool
}

// perSecond is the packet rate the scenario sends to clients when every
// packet arrives: each speaker's 50 packets/s reach S-1 speakers and L
// listeners.
func (o options) perSecond() float64 {
	return float64(o.rooms*o.speakers*(o.speakers-1+o.listeners)) * 50
}

func bench(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.pairs)*10*time.Minute)
	defer cancel()
	fmt.Fprintf(os.Stderr, "scenario: %d rooms × %d speakers × %d listeners, %d participants, %.0f packets/s to deliver; %d driver processes on CPUs %q, server on %q\n",
		o.rooms, o.speakers, o.listeners, o.rooms*(o.speakers+o.listeners), o.perSecond(), o.procs, o.driverCPUs, o.serverCPUs)
	var rows []result
	ratios := []float64{}
	for pair := 1; pair <= o.pairs; pair++ {
		var pr [2]result
		starts := []func(context.Context) (server, error){
			func(ctx context.Context) (server, error) { return startConcord(ctx, o, pair) },
			func(ctx context.Context) (server, error) { return startLiveKit(ctx, o) },
		}
		if o.only {
			starts = starts[:1]
		}
		for i, start := range starts {
			srv, err := start(ctx)
			if err != nil {
				return err
			}
			r, err := measure(ctx, o, srv)
			srv.Stop()
			if err != nil {
				return fmt.Errorf("%s: %w", srv.Name(), err)
			}
			r.pair = pair
			pr[i] = r
			rows = append(rows, r)
			fmt.Fprintf(os.Stderr, "pair %d %s: %.0f delivered/s (%.1f %% of %.0f sent, nominal %.0f), server %.3f cores → %.0f per core; drivers %.3f cores; UDP buffer drops %.0f/s; tracks open %d/%d; load %s → %s\n",
				pair, r.name, r.rate, 100*r.rate/r.expected, r.expected, o.perSecond(), r.cores, r.perCore, r.driverCores, r.drops, r.open, r.tracks, r.load0, r.load1)
		}
		if !o.only && pr[1].perCore > 0 {
			ratios = append(ratios, pr[0].perCore/pr[1].perCore)
		}
	}
	fmt.Printf("\n%d rooms × %d speakers × %d listeners (%.0f packets/s sent to clients), %d driver processes\n\n", o.rooms, o.speakers, o.listeners, o.perSecond(), o.procs)
	fmt.Printf("| pair | server | tracks open | sent to clients / s | delivered / s (%% of sent) | server CPU (cores) | **delivered / s per core** | drivers' CPU | UDP buffer drops / s | load average (1 min, start → end) | Concord / LiveKit |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for i, r := range rows {
		ratio := ""
		if !o.only && i%2 == 1 && len(ratios) > i/2 {
			ratio = fmt.Sprintf("**%.2f**", ratios[i/2])
		}
		fmt.Printf("| %d | %s | %d / %d | %.0f | %.0f (%.1f %%) | %.3f | **%.0f** | %.3f | %.0f | %s → %s | %s |\n", r.pair, r.name, r.open, r.tracks, r.expected, r.rate, 100*r.rate/r.expected, r.cores, r.perCore, r.driverCores, r.drops, r.load0, r.load1, ratio)
	}
	if len(ratios) > 0 {
		fmt.Printf("\nConcord / LiveKit per core, median of %d pairs: %.2f (pairs: %s)\n", len(ratios), median(ratios), joinFloats(ratios))
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func joinFloats(v []float64) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = strconv.FormatFloat(f, 'f', 2, 64)
	}
	return strings.Join(s, ", ")
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// cpuSeconds is a process's user + system CPU time from /proc.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
