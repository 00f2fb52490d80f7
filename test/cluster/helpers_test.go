//go:build integration

package cluster

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// needEnv returns the environment variable name, failing the test when it
// is unset; how says how to get what it names.
func needEnv(t *testing.T, name, how string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: %s", name, how)
	}
	return v
}

// kafkaAddr is the shared Kafka's host:port (CONCORD_KAFKA).
func kafkaAddr(t *testing.T) string {
	t.Helper()
	return needEnv(t, "CONCORD_KAFKA", "run `make test-deps` and source ~/.cache/concord/test-env.sh, "+
		"or start one with `bash hack/kafka/kafka.sh start` and export its host:port")
}

// kafkaEventlog is the --eventlog flag of a cluster on the shared Kafka
// at kafka with topics and consumer groups of its own, prefixed with its
// keyspace ks: a consumer of another test in the same group would take
// partitions, and the events in them, from this cluster.
func kafkaEventlog(kafka, ks string) string {
	return "--eventlog=kafka://" + kafka + "?topic_prefix=" + ks + "."
}

// startRole runs a node of roles with an HTTP and a gRPC address and a
// data directory of its own; its flags are those, then extra, then
// common.
func startRole(t *testing.T, name, roles string, common []string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--roles=" + roles, "--grpc=" + freeAddr(t), "--data-dir=" + t.TempDir()}, extra...)
	return startNode(t, name, freeAddr(t), append(args, common...)...)
}

// workerFlag is the --worker flag of a node's fixed snowflake worker id.
func workerFlag(worker int) string { return fmt.Sprintf("--worker=%d", worker) }

// registry connects the test to the cluster's etcd, as a node would
// (lease leaseTTL), until the test ends.
func (e clusterEnv) registry(t *testing.T) *etcdreg.Registry {
	t.Helper()
	return connectRegistry(t, e.endpoint)
}

// connectRegistry connects to the etcd at endpoints with the nodes'
// lease TTL; the connection closes when the test ends.
func connectRegistry(t *testing.T, endpoints ...string) *etcdreg.Registry {
	t.Helper()
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: endpoints, LeaseTTL: leaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// watchRing follows the ring of role in reg, as every node of the
// cluster computes it, until the test ends.
func watchRing(t *testing.T, ctx context.Context, reg registry.Registry, role string) *registry.LocalRing {
	t.Helper()
	ring, err := registry.NewLocalRing(ctx, reg, role, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ring.Close)
	return ring
}

// waitRing waits until ring shows n live nodes.
func waitRing(t *testing.T, ring *registry.LocalRing, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changes := ring.Changes(ctx)
	for ring.View().Len() < n {
		if _, ok := <-changes; !ok {
			t.Fatalf("ring has %d nodes, want %d", ring.View().Len(), n)
		}
	}
}

// mustID parses the snowflake s, failing the test when it is not one.
func mustID(t *testing.T, s string) snowflake.ID {
	t.Helper()
	id, err := snowflake.Parse(s)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return id
}

// restartableRole returns start, which runs the node name of roles with
// the snowflake worker worker, its flags then common. A name keeps the
// HTTP and gRPC addresses of its first start across restarts, so that
// the test and its peers reach it where they did; each start has a data
// directory of its own.
func restartableRole(t *testing.T, roles string, common []string) (start func(name string, worker int) *proc) {
	httpAddr, grpcAddr := map[string]string{}, map[string]string{}
	return func(name string, worker int) *proc {
		t.Helper()
		if httpAddr[name] == "" {
			httpAddr[name], grpcAddr[name] = freeAddr(t), freeAddr(t)
		}
		return startNode(t, name, httpAddr[name], append([]string{"--roles=" + roles, "--grpc=" + grpcAddr[name],
			workerFlag(worker), "--data-dir=" + t.TempDir()}, common...)...)
	}
}

// channelHistory reads a channel's whole history, page by page, newest
// last.
func channelHistory(t *testing.T, api rest, token, channel string) []message {
	t.Helper()
	var all []message
	before := ""
	for {
		var page []message
		path := "/channels/" + channel + "/messages?limit=100"
		if before != "" {
			path += "&before=" + before
		}
		api.must(t, token, "GET", path, nil, &page)
		all = append(all, page...)
		if len(page) < 100 {
			break
		}
		before = page[len(page)-1].ID
	}
	sort.Slice(all, func(i, j int) bool { return mustID(t, all[i].ID) < mustID(t, all[j].ID) })
	return all
}
