//go:build livekit

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// server is one SFU under test, running in its own process.
type server interface {
	Name() string
	PID() int
	// Target is what the driver processes need to join it.
	Target() target
	// Window marks the start (true) and end (false) of a measured window.
	Window(start bool)
	Stop()
}

// target names the server a driver joins.
type target struct {
	Kind       string // "concord" or "livekit"
	Concord    concordServed
	LiveKitURL string
}

// part is one participant of the scenario.
type part struct {
	ID, Room int
	Speaker  bool
	// Expect is how many remote tracks it receives (the room's other
	// speakers).
	Expect int
}

// driverSpec is one driver process's share of the scenario.
type driverSpec struct {
	Target  target
	Parts   []part
	Joiners int
	// Fanout is how many clients each speaker's packet is for.
	Fanout int
}

type result struct {
	pair                 int
	name                 string
	rate, cores, perCore float64
	driverCores          float64
	// expected is the rate the clients would receive if every packet the
	// speakers actually sent arrived.
	expected float64
	// drops is the machine's UDP receive-buffer overflows per second
	// (all sockets: the clients', the servers', and other processes').
	drops        float64
	load0, load1 string
	// open of tracks delivered a packet before the window.
	open, tracks int
}

// driverProc is one running driver process.
type driverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func (d *driverProc) line() (string, error) {
	if !d.lines.Scan() {
		if err := d.lines.Err(); err != nil {
			return "", err
		}
		return "", errors.New("driver exited")
	}
	return d.lines.Text(), nil
}

// count asks the driver for the packets its clients received so far.
func (d *driverProc) count() (got, want int64, err error) {
	if _, err := io.WriteString(d.stdin, "mark\n"); err != nil {
		return 0, 0, err
	}
	l, err := d.line()
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(l)
	if len(f) != 3 || f[0] != "count" {
		return 0, 0, fmt.Errorf("driver said %q", l)
	}
	if got, err = strconv.ParseInt(f[1], 10, 64); err == nil {
		want, err = strconv.ParseInt(f[2], 10, 64)
	}
	return got, want, err
}

// parts lays out the scenario: per room its speakers, then its listeners.
func (o options) parts() []part {
	var ps []part
	for r := range o.rooms {
		for range o.speakers {
			ps = append(ps, part{ID: len(ps), Room: r, Speaker: true, Expect: o.speakers - 1})
		}
		for range o.listeners {
			ps = append(ps, part{ID: len(ps), Room: r, Expect: o.speakers})
		}
	}
	return ps
}

// measure runs the scenario's clients against srv in -procs driver
// processes, waits until every path is open, then counts over the window.
func measure(ctx context.Context, o options, srv server) (result, error) {
	specs := make([]driverSpec, o.procs)
	for i, p := range o.parts() {
		s := &specs[i%o.procs]
		s.Parts = append(s.Parts, p)
	}
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	var drivers []*driverProc
	defer func() {
		for _, d := range drivers {
			_ = d.stdin.Close()
		}
		for _, d := range drivers {
			done := make(chan struct{})
			go func() { _ = d.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = d.cmd.Process.Kill()
				<-done
			}
		}
	}()
	for _, s := range specs {
		if len(s.Parts) == 0 {
			continue
		}
		s.Target, s.Joiners, s.Fanout = srv.Target(), o.joiners, o.speakers-1+o.listeners
		f, err := os.CreateTemp("", "lkbench-driver-*.json")
		if err != nil {
			return result{}, err
		}
		err = json.NewEncoder(f).Encode(s)
		f.Close()
		defer os.Remove(f.Name())
		if err != nil {
			return result{}, err
		}
		cmd := pinnedCommand(ctx, o.driverCPUs, self, "drive", f.Name())
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return result{}, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return result{}, err
		}
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		drivers = append(drivers, &driverProc{cmd: cmd, stdin: in, lines: bufio.NewScanner(out)})
	}
	r := result{name: srv.Name()}
	for i, d := range drivers {
		l, err := d.line()
		if err != nil {
			return result{}, fmt.Errorf("driver %d: %w", i, err)
		}
		var h, w int
		if _, err := fmt.Sscanf(l, "ready %d %d", &h, &w); err != nil {
			return result{}, fmt.Errorf("driver %d: %s", i, l)
		}
		r.open, r.tracks = r.open+h, r.tracks+w
	}
	time.Sleep(time.Second) // settle (late joiners' first bursts)
	snap := func() (got, want int64, drv float64, err error) {
		for _, d := range drivers {
			n, m, err := d.count()
			if err != nil {
				return 0, 0, 0, err
			}
			got += n
			want += m
			drv += cpuSeconds(d.cmd.Process.Pid)
		}
		return got, want, drv, nil
	}
	r.load0 = loadAvg()
	drops0 := udpRcvbufErrors()
	srv.Window(true)
	got0, want0, drv0, err := snap()
	if err != nil {
		return result{}, err
	}
	cpu0, t0 := cpuSeconds(srv.PID()), time.Now()
	select {
	case <-time.After(o.dur):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	got1, want1, drv1, err := snap()
	if err != nil {
		return result{}, err
	}
	cpu1, t1 := cpuSeconds(srv.PID()), time.Now()
	srv.Window(false)
	r.load1 = loadAvg()
	drops1 := udpRcvbufErrors()
	el := t1.Sub(t0).Seconds()
	r.rate, r.cores, r.driverCores = float64(got1-got0)/el, (cpu1-cpu0)/el, (drv1-drv0)/el
	r.expected = float64(want1-want0) / el
	r.drops = float64(drops1-drops0) / el
	if r.cores > 0 {
		r.perCore = r.rate / r.cores
	}
	return r, nil
}

// startChild starts a server process with GOMAXPROCS=1 (and env);
// its first stdout line, when v is not nil, is JSON into v.
func startChild(cmd *exec.Cmd, v any, env ...string) error {
	cmd.Env = append(append(os.Environ(), "GOMAXPROCS=1"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if v == nil {
		go func() { _, _ = io.Copy(io.Discard, out) }()
		return nil
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		return fmt.Errorf("%s printed nothing", cmd.Path)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return json.Unmarshal(sc.Bytes(), v)
}

// udpRcvbufErrors is the machine's count of UDP datagrams dropped because
// a socket's receive buffer was full (/proc/net/snmp).
func udpRcvbufErrors() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var head []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, h := range head {
			if h == "RcvbufErrors" && i < len(f) {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				return n
			}
		}
	}
	return 0
}
