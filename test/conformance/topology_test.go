package conformance

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	botscassandra "github.com/concord-chat/concord/runtime/bots/cassandra"
	"github.com/concord-chat/concord/runtime/config"
	etcdreg "github.com/concord-chat/concord/runtime/registry/etcd"
	"github.com/concord-chat/concord/runtime/store/cassandra"
	"github.com/concord-chat/concord/test/internal/concordbin"
)

// With CONCORD_CONFORMANCE_TOPOLOGY=cluster every suite of this package
// runs against `concord serve` split over processes instead of `concord
// dev` in the test process: one front node (--roles=api,gateway: the REST
// endpoint and the gateway on one address, as a load balancer would show
// them) and two guild nodes, sharing a Cassandra keyspace and an etcd (a
// registry prefix per test), over gRPC. The bot libraries cannot tell.
const topologyEnv = "CONCORD_CONFORMANCE_TOPOLOGY"

// clusterTopology reports whether the suites run against processes.
func clusterTopology(t *testing.T) bool {
	switch v := os.Getenv(topologyEnv); v {
	case "", "dev":
		return false
	case "cluster":
		return true
	default:
		t.Fatalf("%s=%q: want dev or cluster", topologyEnv, v)
		return false
	}
}

// sharedBackends are the etcd and the keyspace every cluster test of the
// run shares; each test's nodes use their own registry prefix.
var shared struct {
	once     sync.Once
	etcd     string
	store    string
	key      string
	stopEtcd func()
	etcdDir  string
	err      error
}

// TestMain stops the embedded etcd the cluster topology started and
// removes its data directory, so runs do not leave them behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stopEtcd != nil {
		shared.stopEtcd()
	}
	if shared.etcdDir != "" {
		_ = os.RemoveAll(shared.etcdDir)
	}
	os.Exit(code)
}

// clusterBackends starts the embedded etcd and creates the keyspace once.
func clusterBackends(t *testing.T) (etcd, store, key string) {
	t.Helper()
	cass := os.Getenv("CONCORD_CASSANDRA")
	if cass == "" {
		t.Fatalf("%s=cluster needs CONCORD_CASSANDRA (run `make test`, whose hack/test-deps.sh starts Cassandra)", topologyEnv)
	}
	shared.once.Do(func() {
		go func() { _, _ = concordbin.Build() }()
		dir, err := os.MkdirTemp("", "concord-conformance-etcd")
		if err != nil {
			shared.err = err
			return
		}
		shared.etcdDir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		stop, ep, err := etcdreg.StartEmbedded(context.Background(), dir, "")
		if err != nil {
			shared.err = fmt.Errorf("embedded etcd: %w", err)
			return
		}
		ks := fmt.Sprintf("concord_conf_cluster_%d_%06x", time.Now().Unix(), rand.Uint32()&0xffffff)
		st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{cass}, Keyspace: ks, ReplicationFactor: 1})
		if err != nil {
			stop()
			shared.err = fmt.Errorf("create keyspace %s: %w", ks, err)
			return
		}
		// The bot tables too: nodes starting together would race their
		// schema changes, which Cassandra serializes slowly.
		bt, err := botscassandra.New(ctx, botscassandra.Config{}, st)
		if err != nil {
			st.Close()
			stop()
			shared.err = fmt.Errorf("bot tables in %s: %w", ks, err)
			return
		}
		bt.Close()
		st.Close()
		shared.etcd = strings.TrimPrefix(ep, "http://")
		shared.store = "cassandra://" + cass + "/" + ks + "?rf=1"
		shared.key = fmt.Sprintf("%064x", rand.Uint64())
		shared.stopEtcd = stop
	})
	if shared.err != nil {
		t.Fatalf("cluster backends: %v", shared.err)
	}
	return shared.etcd, shared.store, shared.key
}

// node is one `concord serve` process of a test's topology.
type node struct {
	name string
	http string
	cmd  *exec.Cmd
	logs bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
}

func (n *node) Write(b []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.logs.Write(b)
}

func (n *node) output() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.logs.String()
}

// freeLoopback returns a loopback address nobody listens on right now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCluster starts the topology for cfg (the settings a test changed
// map onto the flags of the same names) and returns the front node's
// address once every node is ready.
func startCluster(t *testing.T, cfg config.Config) string {
	t.Helper()
	etcd, store, key := clusterBackends(t)
	bin := concordbin.Path(t)
	prefix := fmt.Sprintf("conf-%d-%06x", time.Now().UnixNano(), rand.Uint32()&0xffffff)
	common := []string{
		"--registry=etcd://" + etcd + "/" + prefix,
		"--store=" + store,
		"--server-key=" + key,
		"--lease-ttl=2s",
		"--retry-interval=500ms",
		"--identify-concurrency=" + strconv.Itoa(cfg.Identify.Concurrency),
		"--log-level=" + map[bool]string{true: "debug", false: "warn"}[os.Getenv("CONCORD_TEST_VERBOSE") != ""],
	}
	start := func(name, roles string, extra ...string) *node {
		n := &node{name: name, http: freeLoopback(t), done: make(chan struct{})}
		args := append([]string{"serve", "--node=" + name, "--roles=" + roles, "--http=" + n.http,
			"--grpc=127.0.0.1:0", "--data-dir=" + t.TempDir()}, append(common, extra...)...)
		n.cmd = exec.Command(bin, args...)
		n.cmd.Stdout, n.cmd.Stderr = n, n
		if os.Getenv("CONCORD_TEST_VERBOSE") != "" {
			n.cmd.Stderr = os.Stderr
		}
		if err := n.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		go func() { _ = n.cmd.Wait(); close(n.done) }()
		t.Cleanup(func() {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.done:
			case <-time.After(15 * time.Second):
				_ = n.cmd.Process.Kill()
				<-n.done
			}
		})
		return n
	}
	nodes := []*node{start("guild-1", "guild"), start("guild-2", "guild"), start("front", "api,gateway", "--redis="+cfg.Redis)}
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range nodes {
		for {
			resp, err := http.Get("http://" + n.http + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-n.done:
				t.Fatalf("%s exited before it was ready:\n%s", n.name, n.output())
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready on %s:\n%s", n.name, n.http, n.output())
			}
		}
	}
	// A guild-less request answered 401 went through the front node to a
	// guild node: the ring has one.
	waitForwarding(t, nodes[2].http, deadline)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("--- %s logs:\n%s", n.name, n.output())
			}
		}
	})
	return nodes[2].http
}

// waitForwarding waits until the front node forwards a REST request to a
// guild node (401 for a request without a token, not the 503 of an empty
// ring).
func waitForwarding(t *testing.T, front string, deadline time.Time) {
	t.Helper()
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + front + "/api/v10/users/@me")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("front node %s forwards no request to a guild node", front)
}
