package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/logbuf"
)

// TestNotReadyWhileStoreUnreachable starts `concord dev` on a Cassandra
// store nobody listens for: the HTTP listener answers at once, /healthz
// 200, /readyz and REST 503, while the process logs that it retries the
// store with backoff.
func TestNotReadyWhileStoreUnreachable(t *testing.T) {
	bin := concordBinary(t)
	addr := freeAddr(t)
	var out logbuf.Buffer
	cmd := exec.Command(bin, "dev", "--http="+addr, "--data-dir="+t.TempDir(), "--store=cassandra://127.0.0.1:1/concord_unreachable")
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("--- output ---\n%s", out.String())
		}
	})

	client := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	// The listener comes up while the store is still being retried.
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _, err := get("/healthz")
		if err == nil && status == http.StatusOK {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("concord dev exited while the store was unreachable: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 20s (last err %v)", err)
		}
	}
	up := time.Since(start)
	asked := time.Now()
	status, body, err := get("/readyz")
	if err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %q, %v; want 503", status, body, err)
	}
	readyzTook := time.Since(asked)
	if status, body, err := get("/api/v10/users/@me"); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("REST while starting = %d %q, %v; want 503", status, body, err)
	}
	// A clear error, retried with backoff: wait for a second attempt.
	for !strings.Contains(out.String(), "cassandra unavailable, retrying") || !strings.Contains(out.String(), "attempt=2") {
		select {
		case err := <-done:
			t.Fatalf("concord dev exited while the store was unreachable: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no second \"cassandra unavailable, retrying\" line within 20s")
		}
	}
	// Still not ready, still running.
	if status, _, err := get("/readyz"); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after retries = %d, %v; want 503", status, err)
	}
	t.Logf("listener up after %v, /readyz answered 503 in %v, two store attempts logged after %v",
		up.Round(time.Millisecond), readyzTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
