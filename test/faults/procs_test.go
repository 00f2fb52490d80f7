//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/topology"
)

// target is a process the nemesis can kill, restart, pause, cut off or
// (for a Cassandra node) skew.
type target struct {
	name string // cassandra-2, kafka-1, etcd-3, guild-1, ...
	kind string // cassandra, kafka, etcd, concord
	// pid is its current process id (0 when it is not running).
	pid func() int
	// endpoints are where it listens now.
	endpoints func() ([]endpoint, error)
	// kill kills it with SIGKILL and waits until it exited.
	kill func() error
	// start starts it again and waits until it serves.
	start func(ctx context.Context) error
	// skewClock moves its wall clock by d (0 puts it right) through
	// Concord's clock seam; nil for what is not a Concord node.
	skewClock func(d time.Duration) error
}

// replTarget is a node of hack/replicated.sh, restarted by the script.
func replTarget(r replicated, name, kind, addr string) *target {
	run := func(ctx context.Context, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "bash", append([]string{r.script}, args...)...).CombinedOutput()
		return string(out), err
	}
	tg := &target{name: name, kind: kind}
	tg.pid = func() int {
		b, err := os.ReadFile(filepath.Join(r.dir, name, "pid"))
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid == 0 || syscall.Kill(pid, 0) != nil {
			return 0
		}
		return pid
	}
	tg.endpoints = func() ([]endpoint, error) { return []endpoint{{Addr: addr}}, nil }
	tg.kill = func() error {
		pid := tg.pid()
		if pid == 0 {
			return fmt.Errorf("%s is not running", name)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond) // a killed JVM has no event to await but its pid going away
		}
		return nil
	}
	tg.start = func(ctx context.Context) error {
		if out, err := run(ctx, "start-node", name); err != nil {
			return fmt.Errorf("start %s: %v\n%s", name, err, out)
		}
		return nil
	}
	return tg
}

// nodeTarget is a `concord serve` node of the topology.
func nodeTarget(n *topology.Node) *target {
	tg := &target{name: n.Name, kind: "concord"}
	tg.pid = func() int {
		select {
		case <-n.Exited():
			return 0
		default:
			return n.Pid()
		}
	}
	tg.endpoints = func() ([]endpoint, error) {
		// Its HTTP address, and whatever else it listens on (its gRPC
		// port, picked by the kernel). HAProxy's master process (-W)
		// listens on nothing itself: its HTTP address stands for it.
		host, port, err := netSplit(n.HTTP)
		if err != nil {
			return nil, err
		}
		eps := []endpoint{{Addr: host, Port: port}}
		more, _ := listening(n.Pid())
		for _, e := range more {
			if e != eps[0] {
				eps = append(eps, e)
			}
		}
		return eps, nil
	}
	tg.kill = func() error { n.Kill(); return nil }
	tg.start = func(ctx context.Context) error { return n.Restart(ctx, 90*time.Second) }
	if n.Name != "haproxy" {
		tg.skewClock = n.SkewClock
	}
	return tg
}

// etcdMember is one member of the test's three-member etcd, on a
// loopback address of its own.
type etcdMember struct {
	child
	addr, dir string
}

// startEtcd starts three members on 127.0.0.31-33 (client port 2379,
// peer 2380) and waits until each is healthy.
func startEtcd(t *testing.T, ctx context.Context) []*etcdMember {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		t.Fatal("no etcd binary: KUBEBUILDER_ASSETS is unset (source ~/.cache/concord/test-env.sh; hack/test-deps.sh builds etcd)")
	}
	bin := filepath.Join(dir, "etcd")
	var peers []string
	var ms []*etcdMember
	for i := 1; i <= 3; i++ {
		m := &etcdMember{child: child{name: fmt.Sprintf("etcd-%d", i)}, addr: fmt.Sprintf("127.0.0.3%d", i), dir: t.TempDir()}
		ms = append(ms, m)
		peers = append(peers, m.name+"=http://"+m.addr+":2380")
	}
	for _, m := range ms {
		m.argv = []string{bin, "--name", m.name, "--data-dir", m.dir,
			"--listen-client-urls", "http://" + m.addr + ":2379", "--advertise-client-urls", "http://" + m.addr + ":2379",
			"--listen-peer-urls", "http://" + m.addr + ":2380", "--initial-advertise-peer-urls", "http://" + m.addr + ":2380",
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "concord-faults", "--log-level", "warn",
			"--listen-metrics-urls", "http://" + m.addr + ":2381"}
		if err := m.run(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.kill() })
	}
	for _, m := range ms {
		if err := m.awaitHealthy(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// awaitHealthy polls /health until the member is part of a cluster with a
// leader.
func (m *etcdMember) awaitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + m.addr + ":2379/health")
		if err == nil {
			var h struct {
				Health string `json:"health"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				return nil
			}
		}
		select {
		case <-m.exited():
			return fmt.Errorf("%s exited:\n%s", m.name, m.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy within %v:\n%s", m.name, timeout, m.logs.String())
		}
	}
}

func (m *etcdMember) target() *target {
	tg := &target{name: m.name, kind: "etcd"}
	tg.pid = m.pid
	tg.endpoints = func() ([]endpoint, error) { return []endpoint{{Addr: m.addr}}, nil }
	tg.kill = m.kill
	tg.start = func(ctx context.Context) error {
		if err := m.run(); err != nil {
			return err
		}
		return m.awaitHealthy(ctx, time.Minute)
	}
	return tg
}

// netSplit splits host:port.
func netSplit(hostport string) (string, int, error) {
	i := strings.LastIndex(hostport, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("address %q has no port", hostport)
	}
	port, err := strconv.Atoi(hostport[i+1:])
	return hostport[:i], port, err
}
