// Package redistest runs a private redis-server for a test that needs a
// server configured unlike the shared one CONCORD_REDIS names (a
// password, for one), so tests of Redis authentication run against the
// real server without each writing the setup again.
package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StartRequirePass runs redis-server (from PATH) on a free loopback port
// with --requirepass password and no persistence until the test ends, and
// returns its address once it accepts connections. A missing redis-server
// fails the test and says how to install it.
func StartRequirePass(t testing.TB, password string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not on PATH: install it (apt-get install redis-server, or run hack/redis/start.sh once as root)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var out strings.Builder
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--requirepass", password,
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s within 10s: %v\n%s", addr, err, out.String())
		}
	}
}
