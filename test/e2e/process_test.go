package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/concordbin"
)

// concordBinary builds runtime/cmd/concord once per test run.
func concordBinary(t *testing.T) string { return concordbin.Path(t) }

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is a running `concord` process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	out  *bytes.Buffer
	mu   *sync.Mutex
	// token is the dev token printed at start, when there is one.
	token string
}

// startConcord runs `concord <args>` and waits until /readyz answers 200
// and the startup banner was printed.
func startConcord(t *testing.T, addr string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(concordBinary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	cmd.Stderr = &lockedWriter{mu: &mu, w: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start concord: %v", err)
	}
	p := &proc{t: t, cmd: cmd, addr: addr, out: &logs, mu: &mu}
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		token := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Dev token:"); ok {
				token = strings.TrimSpace(v)
			}
			if strings.Contains(line, "Metrics:") { // the banner's last line
				select {
				case banner <- token:
				default:
				}
			}
		}
		close(banner)
	}()
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(2 * time.Minute) // a bound on a loaded CI machine, not an expectation
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("concord did not become ready on %s; logs:\n%s", addr, p.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case tok := <-banner:
		p.token = tok
	case <-time.After(5 * time.Second):
	}
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.cmd.Wait()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
