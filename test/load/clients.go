package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Clients is one client process of gateway sessions started by another
// harness than Run (the big-guild benchmark in runtime/domain/guild): the
// same binary re-executed, which must call MaybeRunClient first. Its
// sessions IDENTIFY to a Concord gateway at url and count deliveries
// whose payload carries "round" and "ts" (send time, Unix ns).
type Clients struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// ClientStats is a client process's latency report.
type ClientStats struct {
	Received      int64
	P50, P99, Max time.Duration
	ClientCPU     time.Duration
	WireBytes     int64
	Percentiles   []time.Duration
}

// StartClients starts a process of n gateway sessions dialling url from
// the source addresses given, counting rounds 1..rounds (a delivery of
// another round is ignored).
func StartClients(ctx context.Context, url string, n, rounds int, sources []string) (*Clients, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("load: executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		envRole+"=client", envSystem+"="+SystemGateway, envURL+"="+url,
		envN+"="+strconv.Itoa(n), envRounds+"="+strconv.Itoa(rounds),
		envSources+"="+strings.Join(sources, ","))
	cmd.Stderr = os.Stderr
	c := &Clients{cmd: cmd, lines: make(chan string, 1024)}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("load: start clients: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

// Expect waits for the process's next line, which must start with prefix.
func (c *Clients) Expect(prefix string, timeout time.Duration) (string, error) {
	return expectLine(c.lines, prefix, timeout)
}

// expectLine waits for a client process's next line on lines, which must
// start with prefix; a line starting "error" is the client's failure.
func expectLine(lines <-chan string, prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-lines:
		if !ok {
			return "", errors.New("load: client process exited")
		}
		if strings.HasPrefix(l, "error") {
			return "", errors.New(l)
		}
		if !strings.HasPrefix(l, prefix) {
			return "", fmt.Errorf("load: client said %q, want %q", l, prefix)
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("load: no %q from clients in %v", prefix, timeout)
	}
}

// Finish closes the sessions and returns the latencies they saw.
func (c *Clients) Finish() (ClientStats, error) {
	var st ClientStats
	_ = c.stdin.Close()
	l, err := c.Expect("stats", 5*time.Minute)
	if err != nil {
		return st, err
	}
	var p50, p99, mx, cpu int64
	if _, err := fmt.Sscanf(l, "stats %d %d %d %d %d %d", &st.Received, &p50, &p99, &mx, &cpu, &st.WireBytes); err != nil {
		return st, fmt.Errorf("load: stats %q: %w", l, err)
	}
	st.P50, st.P99, st.Max, st.ClientCPU = time.Duration(p50), time.Duration(p99), time.Duration(mx), time.Duration(cpu)
	if l, err = c.Expect("cdf", time.Minute); err != nil {
		return st, err
	}
	for _, f := range strings.Fields(l)[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return st, fmt.Errorf("load: cdf %q: %w", l, err)
		}
		st.Percentiles = append(st.Percentiles, time.Duration(v))
	}
	return st, nil
}

// Close kills the process if it still runs.
func (c *Clients) Close() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// Sources returns the source addresses for n sessions of client group
// group, perSource sessions each (127.<10+group/250>.<group%250+1>.x).
func Sources(group, n, perSource int) []string { return sources(group, n, perSource) }
