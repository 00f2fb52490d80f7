//go:build livekit

// Command lkbench compares Concord's SFU with LiveKit server v1.13.5 in
// one run, driven by the same pion WebRTC clients: one room, one speaker
// sending 20 ms Opus-sized RTP packets, N listeners. Each server runs in
// its own process (GOMAXPROCS=1); its CPU (user + system from
// /proc/<pid>/stat) over the measured window divides the packets its
// listeners received over that window: forwarded packets per second per
// core. Counting starts only after every listener has received a packet
// (the paths are open).
//
//	CGO_ENABLED=0 GOBIN=~/.cache/concord/livekit/bin go install github.com/livekit/livekit-server/cmd/server@v1.13.5
//	cd test/voice/lkbench && go run -tags livekit . -listeners 20 -duration 10s
//
// It is its own module so that the LiveKit client SDK stays out of
// Concord's dependencies.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// peer is one benchmark client: a speaker (Send) or a listener counting
// what it receives.
type peer interface {
	Send(p *rtp.Packet) error
	Close()
}

// system is one SFU under test.
type system interface {
	Name() string
	PID() int
	Join(ctx context.Context, i int, speaker bool, got *atomic.Int64) (peer, error)
	Stop()
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "concord-sfu" {
		if err := serveConcord(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	home, _ := os.UserHomeDir()
	listeners := flag.Int("listeners", 20, "listeners in the room")
	dur := flag.Duration("duration", 10*time.Second, "measured window")
	lk := flag.String("livekit", filepath.Join(home, ".cache/concord/livekit/bin/server"), "livekit-server v1.13.5 binary")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var results []result
	for _, start := range []func(context.Context) (system, error){startConcord, func(ctx context.Context) (system, error) { return startLiveKit(ctx, *lk) }} {
		sys, err := start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		r, err := measure(ctx, sys, *listeners, *dur)
		sys.Stop()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", sys.Name(), err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "%s: %d listeners, %.0f delivered/s, %.3f cores, %.0f per core\n", r.name, r.listeners, r.rate, r.cores, r.perCore)
		results = append(results, r)
	}
	fmt.Printf("| server | listeners | delivered / s | server CPU (cores) | **delivered / s per core** |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.0f | %.3f | **%.0f** |\n", r.name, r.listeners, r.rate, r.cores, r.perCore)
	}
	fmt.Printf("\nConcord / LiveKit per core: %.2f\n", results[0].perCore/results[1].perCore)
}

type result struct {
	name                 string
	listeners            int
	rate, cores, perCore float64
}

// measure joins the listeners and the speaker, sends until every listener
// heard a packet, then counts over dur.
func measure(ctx context.Context, sys system, n int, dur time.Duration) (result, error) {
	counts := make([]*atomic.Int64, n)
	var peers []peer
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	for i := range counts {
		counts[i] = &atomic.Int64{}
		p, err := sys.Join(ctx, i+1, false, counts[i])
		if err != nil {
			return result{}, fmt.Errorf("listener %d: %w", i, err)
		}
		peers = append(peers, p)
	}
	speaker, err := sys.Join(ctx, 0, true, nil)
	if err != nil {
		return result{}, fmt.Errorf("speaker: %w", err)
	}
	peers = append(peers, speaker)
	payload := make([]byte, 120)
	var seq uint16
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			seq++
			_ = speaker.Send(&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: seq, Timestamp: uint32(seq) * 960, SSRC: 0x1234}, Payload: payload})
		}
	}()
	defer func() { close(stop); <-done }()
	// Warm-up: every listener's path is open once it heard a packet.
	deadline := time.Now().Add(60 * time.Second)
	for {
		heard := 0
		for _, c := range counts {
			if c.Load() > 0 {
				heard++
			}
		}
		if heard == n {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("only %d of %d listeners heard the speaker within 60 s", heard, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // settle (late joiners' first bursts)
	sum := func() (s int64) {
		for _, c := range counts {
			s += c.Load()
		}
		return s
	}
	cpu0, got0, t0 := cpuSeconds(sys.PID()), sum(), time.Now()
	time.Sleep(dur)
	cpu1, got1, t1 := cpuSeconds(sys.PID()), sum(), time.Now()
	el := t1.Sub(t0).Seconds()
	r := result{name: sys.Name(), listeners: n, rate: float64(got1-got0) / el, cores: (cpu1 - cpu0) / el}
	if r.cores > 0 {
		r.perCore = r.rate / r.cores
	}
	return r, nil
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

// child starts a server process whose first stdout line is JSON into v.
func child(ctx context.Context, cmd *exec.Cmd, v any) error {
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		return fmt.Errorf("%s printed nothing", cmd.Path)
	}
	return json.Unmarshal(sc.Bytes(), v)
}

// pionAPI is the clients' pion API: host candidates on loopback, UDP4.
func pionAPI() (*webrtc.API, error) {
	se := webrtc.SettingEngine{}
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	return webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me)), nil
}
