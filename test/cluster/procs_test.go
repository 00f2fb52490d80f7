package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/concordbin"
	"github.com/concord-chat/concord/internal/resttest"
)

// concordBinary builds runtime/cmd/concord once per test run.
func concordBinary(t *testing.T) string { return concordbin.Path(t) }

// buildBinary builds the binary once; any goroutine may call it.
func buildBinary() { _, _ = concordbin.Build() }

// freeAddr returns a loopback address nobody listens on right now, on a
// random 127.0.0.x (x ≥ 2): outgoing connections take their ephemeral
// ports on 127.0.0.1, so between this check and the node's bind no
// client socket can take the port from it.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", 2+rand.IntN(250)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is a running `concord serve` process.
type proc struct {
	name    string
	http    string
	cmd     *exec.Cmd
	mu      sync.Mutex
	logs    bytes.Buffer
	changed chan struct{} // closed and replaced at every write
	done    chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.changed)
	p.changed = make(chan struct{})
	return p.logs.Write(b)
}

// logChanged returns a channel closed at the next write to the log.
func (p *proc) logChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// startNode runs `concord serve` with args; it does not wait for
// readiness (waitReady does).
func startNode(t *testing.T, name, httpAddr string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(concordBinary(t), append([]string{"serve", "--node=" + name, "--http=" + httpAddr}, args...)...)
	return runProc(t, name, httpAddr, cmd, func(logs string) (string, string) { return "", logs })
}

// runProc starts cmd as the process name (HTTP on httpAddr, "" for none)
// with its output in the proc's log. When the test ends it is killed,
// and if the test failed show(log) gives what to print of its log and a
// note on it for the heading.
func runProc(t *testing.T, name, httpAddr string, cmd *exec.Cmd, show func(logs string) (note, shown string)) *proc {
	t.Helper()
	p := &proc{name: name, http: httpAddr, cmd: cmd, changed: make(chan struct{}), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			note, shown := show(p.output())
			t.Logf("--- logs of %s%s ---\n%s", name, note, shown)
		}
	})
	return p
}

// readyFloor is the least time a node gets to become ready, whatever
// deadline its test passes: on a loaded CI machine a node's schema
// migration alone has taken 27 s.
const readyFloor = 2 * time.Minute

// waitReady polls /readyz until it answers 200; the process exiting or
// the deadline (at least readyFloor from now) passing fails the test with
// its logs.
func (p *proc) waitReady(t *testing.T, deadline time.Time) {
	t.Helper()
	if floor := time.Now().Add(readyFloor); deadline.Before(floor) {
		deadline = floor
	}
	for {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready:\n%s", p.name, p.output())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready on %s:\n%s", p.name, p.http, p.output())
		}
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// rest is a REST client for one address.
type rest struct {
	addr   string
	client *http.Client
}

// do sends a JSON request and decodes a 2xx answer into out. err is a
// transport error; the status says the rest.
func (r rest) do(ctx context.Context, token, method, path string, body, out any) (int, []byte, error) {
	return resttest.Do(ctx, r.client, method, "http://"+r.addr+"/api/v10"+path, token, body, out)
}

// must is do for setup steps: anything but a 2xx fails the test.
func (r rest) must(t *testing.T, token, method, path string, body, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	status, raw, err := r.do(ctx, token, method, path, body, out)
	if err != nil || status/100 != 2 {
		t.Fatalf("%s %s: status %d, err %v, body %s", method, path, status, err, raw)
	}
}

// execConcord runs the binary to completion and returns its output.
func execConcord(ctx context.Context, t *testing.T, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, concordBinary(t), args...).CombinedOutput()
	return string(out), err
}
