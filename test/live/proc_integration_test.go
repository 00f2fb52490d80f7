//go:build integration

package live

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/concordbin"

	"github.com/concord-chat/concord/internal/logbuf"
)

// proc is a running `concord serve` process.
type proc struct {
	name string
	url  string
	cmd  *exec.Cmd
	out  *logbuf.Buffer
	done chan struct{}
}

// freeAddr returns a loopback address nobody listens on right now, on a
// random 127.0.0.x (x >= 2), away from the ephemeral ports clients take
// on 127.0.0.1.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", 2+rand.IntN(250)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProc runs `concord serve --node=name --http=<free> args...`; it is
// killed at cleanup, and its output logged when the test failed.
func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	p := &proc{name: name, url: "http://" + addr, out: &logbuf.Buffer{}, done: make(chan struct{})}
	// Each process keeps its own data (the guild role's outbox) in a
	// directory of the test, never in the working directory.
	p.cmd = exec.Command(concordbin.Path(t), append([]string{"serve", "--node=" + name, "--http=" + addr, "--data-dir=" + t.TempDir()}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- %s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// waitReady waits until /readyz answers 200, failing if the process
// exits or takes more than three minutes (a first start migrates the
// Cassandra schema, which a loaded shared machine has taken over a
// minute to do).
func (p *proc) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, p.out.String())
		default:
		}
		if resp, err := http.Get(p.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after three minutes:\n%s", p.name, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() { p.signal(syscall.SIGKILL) }

// signal sends sig and waits until the process is gone.
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}
