//go:build integration && livebench

package live

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// peerBin is a built peer of the benchmark.
type peerBin struct{ name, path string }

// buildPeers builds the benchmark's peers into the test's temporary
// directory: ./livepeer (centrifuge, livebench tag) and ./mercurepeer
// (mercure, a module of its own, built from its committed go.sum).
func buildPeers(t *testing.T) []peerBin {
	t.Helper()
	dir := t.TempDir()
	build := func(name, pkgDir string, args ...string) peerBin {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", bin, ".")...)
		cmd.Dir = pkgDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkgDir, err, out)
		}
		return peerBin{name: name, path: bin}
	}
	if os.Getenv("LIVEBENCH_PEERS") == "none" {
		// Iterating on the gateway alone; recorded runs keep the peers.
		return nil
	}
	return []peerBin{build("centrifuge", "livepeer", "-tags", "livebench"), build("mercure", "mercurepeer")}
}

// peerProc is one running livepeer process.
type peerProc struct {
	cmd  *exec.Cmd
	host string
	done chan struct{}
}

// startPeer runs bin on a free loopback address and waits for the
// address it prints; the process is killed at cleanup.
func startPeer(t *testing.T, bin string) *peerProc {
	t.Helper()
	addr := freeAddr(t)
	p := &peerProc{cmd: exec.Command(bin, "-addr", addr), done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	p.cmd.Stderr = &stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start livepeer: %v", err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("livepeer printed no address: %v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	p.host = strings.TrimPrefix(strings.TrimSpace(line), "http://")
	return p
}

// stop kills the process and waits until it is gone.
func (p *peerProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// subscribers is the peer's subscriber count of the bench channel.
func (p *peerProc) subscribers(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.host + "/subscribers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("livepeer subscribers %q: %v", b, err)
	}
	return float64(n)
}

// publish broadcasts body to the peer's viewers.
func (p *peerProc) publish(t *testing.T, body []byte) {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Post("http://"+p.host+"/publish", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("livepeer publish: %s", resp.Status)
	}
}

// cpu is the peer process's user+system CPU seconds so far.
func (p *peerProc) cpu(t *testing.T) float64 {
	t.Helper()
	return pidCPU(t, p.cmd.Process.Pid)
}
