package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/concord-chat/concord/internal/concordbin"
	"github.com/concord-chat/concord/internal/logbuf"
)

// concordProc is one `concord` process a test of this package starts
// itself: the `concord dev` the route walk compares against, and the
// nodes the cluster pass adds to internal/topology's (data, read-state,
// voice and a second api node, as `make run-cluster` runs them).
type concordProc struct {
	name string
	// addr is its HTTP address (host:port).
	addr string
	cmd  *exec.Cmd
	dir  string
	logs logbuf.Buffer
	done chan struct{}
}

// startProc runs the concord binary with args, --http on a free loopback
// port and --data-dir in a fresh directory, and waits until it answers
// /readyz (or exits, or timeout passes).
func startProc(ctx context.Context, name string, timeout time.Duration, args ...string) (*concordProc, error) {
	bin, err := concordbin.Build()
	if err != nil {
		return nil, fmt.Errorf("build concord: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	dir, err := os.MkdirTemp("", "concord-api-"+name)
	if err != nil {
		return nil, err
	}
	p := &concordProc{name: name, addr: addr, dir: dir, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append(args, "--http="+addr, "--data-dir="+dir)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			err := fmt.Errorf("%s exited before it was ready:\n%s", name, p.logs.String())
			p.stop()
			return nil, err
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready on %s after %v:\n%s", name, addr, timeout, p.logs.String())
		}
	}
}

// stop ends the process (SIGTERM, SIGKILL after 15 s) and removes its
// data directory.
func (p *concordProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = os.RemoveAll(p.dir)
}
