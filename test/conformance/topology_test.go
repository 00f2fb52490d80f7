package conformance

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/topology"
	"github.com/concord-chat/concord/runtime/config"
)

// With CONCORD_CONFORMANCE_TOPOLOGY=cluster every suite of this package
// runs against `concord serve` split over processes instead of `concord
// dev` in the test process: internal/topology's two gateway nodes and two
// api nodes behind HAProxy, and two guild nodes, sharing a Cassandra
// keyspace and an etcd (a registry prefix per test), over gRPC. The bot
// libraries see one address, as they would a deployment; their
// reconnects and resumes may land on either gateway node.
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

// shared are the backends every cluster test of the run shares.
var shared struct {
	once     sync.Once
	backends *topology.Backends
	err      error
}

// TestMain stops the embedded etcd the cluster topology started and
// removes its data directory, so runs do not leave them behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.backends != nil {
		shared.backends.Close()
	}
	os.Exit(code)
}

// clusterBackends starts the shared backends once.
func clusterBackends(t *testing.T) *topology.Backends {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.backends, shared.err = topology.StartBackends(ctx, os.Getenv("CONCORD_CASSANDRA"), "concord_conf_cluster")
	})
	if shared.err != nil {
		t.Fatalf("%s=cluster: backends: %v", topologyEnv, shared.err)
	}
	return shared.backends
}

// startCluster starts the topology for cfg (the settings a test changed
// map onto the flags of the same names) and returns HAProxy's address
// once every node is ready.
func startCluster(t *testing.T, cfg config.Config) string {
	t.Helper()
	b := clusterBackends(t)
	c, err := topology.Start(t.Context(), b, topology.Options{
		Flags:      []string{"--identify-concurrency=" + strconv.Itoa(cfg.Identify.Concurrency)},
		FrontFlags: []string{"--redis=" + cfg.Redis},
		Verbose:    os.Getenv("CONCORD_TEST_VERBOSE") != "",
	})
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
		c.Close()
	})
	return c.Front
}
