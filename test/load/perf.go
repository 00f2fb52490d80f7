package load

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// perfEvents are what Options.Perf counts in the server process during
// the rounds: every system call, the three write calls a delivery can use
// (the gateway's is sendmsg, the floor's write), and the scheduler's
// context switches.
var perfEvents = []string{
	"raw_syscalls:sys_enter",
	"syscalls:sys_enter_write",
	"syscalls:sys_enter_writev",
	"syscalls:sys_enter_sendmsg",
	"context-switches",
}

// perfStat is `perf stat` attached to this process, started with its
// counters disabled and switched on and off around the rounds through its
// control pipe (each command acknowledged), so the handshakes are not
// counted.
type perfStat struct {
	cmd  *exec.Cmd
	ctl  *os.File
	ack  *bufio.Reader
	ackF *os.File
	out  bytes.Buffer
}

func startPerf() (*perfStat, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &perfStat{ctl: ctlW, ack: bufio.NewReader(ackR), ackF: ackR}
	// ExtraFiles become descriptors 3 and 4 in perf.
	p.cmd = exec.Command("perf", "stat", "-x", ",", "-D", "-1", "--control", "fd:3,4",
		"-p", strconv.Itoa(os.Getpid()), "-e", strings.Join(perfEvents, ","))
	p.cmd.ExtraFiles = []*os.File{ctlR, ackW}
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("load: start perf stat: %w", err)
	}
	ctlR.Close()
	ackW.Close()
	return p, nil
}

// command sends one control command and waits for perf's ack.
func (p *perfStat) command(c string) error {
	if _, err := io.WriteString(p.ctl, c+"\n"); err != nil {
		return fmt.Errorf("load: perf %s: %w", c, err)
	}
	l, err := p.ack.ReadString('\n')
	if err != nil || !strings.Contains(l, "ack") {
		return fmt.Errorf("load: perf %s: ack %q: %v (perf said %s)", c, l, err, p.out.String())
	}
	return nil
}

// stop ends perf and returns each event's count.
func (p *perfStat) stop() (map[string]int64, error) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
	p.ctl.Close()
	p.ackF.Close()
	counts := map[string]int64{}
	for l := range strings.Lines(p.out.String()) {
		f := strings.Split(strings.TrimSpace(l), ",")
		if len(f) < 3 {
			continue
		}
		if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			counts[f[2]] = v
		}
	}
	if len(counts) == 0 {
		return nil, fmt.Errorf("load: perf stat counted nothing: %s", p.out.String())
	}
	return counts, nil
}

// runQueueDelay is the time this process's threads have spent runnable
// but waiting for a CPU (the second field of each thread's
// /proc/self/task/*/schedstat); on a shared machine, the part of a
// round's latency that is other processes' work.
func runQueueDelay() time.Duration {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			sum += v
		}
	}
	return time.Duration(sum)
}

// WriteKernelTable writes, per delivery, the server's system calls and
// context switches (with Options.Perf), the time its threads waited for a
// CPU during the rounds, and the server's and the client's CPU per round.
func WriteKernelTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tN\tsyscalls/delivery\twrite/delivery\twritev/delivery\tsendmsg/delivery\tctx switches/delivery\trun-queue wait/round\tCPU/round\tclient CPU/round\t")
	for _, r := range results {
		d := float64(max(r.Deliveries, 1))
		per := func(event string) string {
			if r.Kernel == nil {
				return "-"
			}
			return strconv.FormatFloat(float64(r.Kernel[event])/d, 'f', 3, 64)
		}
		rounds := time.Duration(max(r.Rounds, 1))
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%v\t%v\t%v\t\n", r.System, r.N,
			per("raw_syscalls:sys_enter"), per("syscalls:sys_enter_write"), per("syscalls:sys_enter_writev"), per("syscalls:sys_enter_sendmsg"), per("context-switches"),
			(r.RunQueueWait / rounds).Round(time.Microsecond), (r.ServerCPU / rounds).Round(time.Microsecond),
			(r.ClientCPU / rounds).Round(time.Microsecond))
	}
	return tw.Flush()
}
