//go:build integration && chaos

package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startExternal runs a backend binary (etcd, redis-server) as a process
// the test can kill -9, its output kept like a node's.
func startExternal(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startExternalEnv(t, name, nil, bin, args...)
}

// startExternalEnv is startExternal with the process's environment (nil:
// the test's).
func startExternalEnv(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	return runProc(t, name, "", cmd, func(logs string) (string, string) { return " (last 4 KiB)", tail(logs, 4096) })
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// awaitUp polls check until it succeeds; the process exiting or the
// deadline passing fails the test with its logs.
func awaitUp(t *testing.T, p *proc, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before %s:\n%s", p.name, what, tail(p.output(), 4096))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s within %v (%v):\n%s", p.name, what, timeout, err, tail(p.output(), 4096))
		}
	}
}

// etcdCluster is three etcd members started from the etcd binary, so
// that one can be killed while the other two keep a quorum.
type etcdCluster struct {
	bin     string
	members []*etcdMember
}

type etcdMember struct {
	name, client, peer, dir string
	args                    []string
	p                       *proc
}

// etcdBinary is the etcd server hack/envtest/build.sh builds (and caches)
// from the Go module proxy.
func etcdBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "etcd")); err == nil {
			return filepath.Join(dir, "etcd")
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack/envtest/build.sh")).Output()
	if err != nil {
		t.Fatalf("hack/envtest/build.sh (builds etcd): %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := filepath.Join(strings.TrimSpace(lines[len(lines)-1]), "etcd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no etcd binary from hack/envtest/build.sh: %v", err)
	}
	return bin
}

// startEtcdCluster starts three members with the flags
// hack/run-cluster.sh uses and waits until each is healthy.
func startEtcdCluster(t *testing.T) *etcdCluster {
	t.Helper()
	c := &etcdCluster{bin: etcdBinary(t)}
	var peers []string
	for i := 1; i <= 3; i++ {
		m := &etcdMember{name: fmt.Sprintf("etcd-%d", i), client: freeAddr(t), peer: freeAddr(t), dir: t.TempDir()}
		c.members = append(c.members, m)
		peers = append(peers, m.name+"=http://"+m.peer)
	}
	for _, m := range c.members {
		m.args = []string{"--name", m.name, "--data-dir", m.dir,
			"--listen-client-urls", "http://" + m.client, "--advertise-client-urls", "http://" + m.client,
			"--listen-peer-urls", "http://" + m.peer, "--initial-advertise-peer-urls", "http://" + m.peer,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "concord-chaos", "--log-level", "warn",
			"--listen-metrics-urls", "http://" + freeAddr(t)}
		m.p = startExternal(t, m.name, c.bin, m.args...)
	}
	for _, m := range c.members {
		c.awaitHealthy(t, m)
	}
	return c
}

// awaitHealthy waits until member m answers /health with health true
// (it is part of a cluster with a leader).
func (c *etcdCluster) awaitHealthy(t *testing.T, m *etcdMember) {
	t.Helper()
	awaitUp(t, m.p, "/health", 60*time.Second, func() error {
		resp, err := http.Get("http://" + m.client + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Health != "true" {
			return fmt.Errorf("health %q, %v", h.Health, err)
		}
		return nil
	})
}

// restart starts m again on its data directory: it rejoins the cluster.
func (c *etcdCluster) restart(t *testing.T, m *etcdMember) {
	t.Helper()
	m.p = startExternal(t, m.name, c.bin, m.args...)
	c.awaitHealthy(t, m)
}

// endpoints are the client addresses, comma-separated.
func (c *etcdCluster) endpoints() string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return strings.Join(out, ",")
}

// privateRedis is a redis-server of the test's own on a random port (the
// shared test Redis other packages use is never killed).
type privateRedis struct {
	addr string
	args []string
	p    *proc
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed: run `make test-deps` (hack/redis/start.sh installs it)")
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	r := &privateRedis{addr: addr, args: []string{"--bind", host, "--port", port, "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--loglevel", "warning"}}
	r.p = startExternal(t, "redis", bin, r.args...)
	r.awaitUp(t)
	return r
}

func (r *privateRedis) restart(t *testing.T) {
	t.Helper()
	r.p = startExternal(t, "redis", r.p.cmd.Path, r.args...)
	r.awaitUp(t)
}

// awaitUp waits until the server answers PING.
func (r *privateRedis) awaitUp(t *testing.T) {
	t.Helper()
	awaitUp(t, r.p, "PONG", 30*time.Second, func() error {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "+PONG" {
			return fmt.Errorf("PING: %q, %v", line, err)
		}
		return nil
	})
}

// privateKafka is a single-node Kafka of the test's own (hack/kafka/kafka.sh
// run in the foreground on free ports, its data in a temporary directory),
// so that the test can kill -9 it: the shared test Kafka other packages use
// is never killed.
type privateKafka struct {
	addr, dir string
	script    string
	env       []string
	p         *proc
}

func startPrivateKafka(t *testing.T) *privateKafka {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	addr, ctrl := freeAddr(t), freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	_, cport, _ := net.SplitHostPort(ctrl)
	k := &privateKafka{addr: addr, dir: t.TempDir(), script: filepath.Join(root, "hack/kafka/kafka.sh")}
	k.env = append(os.Environ(), "KAFKA_HOST="+host, "KAFKA_PORT="+port, "KAFKA_CONTROLLER_PORT="+cport,
		"KAFKA_RUN_DIR="+k.dir, "KAFKA_HEAP=384M")
	k.start(t)
	return k
}

// start runs the broker on k's data directory (formatted on the first
// start); awaitUp waits until it serves.
func (k *privateKafka) start(t *testing.T) {
	t.Helper()
	_ = os.Remove(filepath.Join(k.dir, "logs", "server.log"))
	k.p = startExternalEnv(t, "kafka", k.env, "bash", k.script, "run")
}

// awaitUp waits until the broker answers on its port and logged that it
// started (the socket binds before the broker serves).
func (k *privateKafka) awaitUp(t *testing.T) {
	t.Helper()
	awaitUp(t, k.p, "Kafka Server started", 180*time.Second, func() error {
		c, err := net.DialTimeout("tcp", k.addr, time.Second)
		if err != nil {
			return err
		}
		c.Close()
		b, err := os.ReadFile(filepath.Join(k.dir, "logs", "server.log"))
		if err != nil || !strings.Contains(string(b), "Kafka Server started") {
			return fmt.Errorf("not started yet (%v)", err)
		}
		return nil
	})
}
