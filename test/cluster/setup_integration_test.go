//go:build integration

package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
)

// clusterEnv is what every multi-process test starts from: the Cassandra
// address, an embedded etcd endpoint and a fresh keyspace whose schema is
// already created (so nodes start without migrating), with the concord
// binary built.
type clusterEnv struct {
	cass     string
	endpoint string
	ks       string
	// schemaTook is how long creating the keyspace took.
	schemaTook time.Duration
	// key is the server key every node of the test shares.
	key string
}

// nodeArgs are the flags every node of the test's cluster shares — the
// registry, the store, the server key, the admin token, the test's lease TTL and a short
// retry interval, and no REST rate limits (the tests send faster than a
// channel's 5 per 5 s; TestRateLimitsSharedAcrossAPINodes turns them on)
// — followed by extra.
func (e clusterEnv) nodeArgs(extra ...string) []string {
	return append([]string{
		"--registry=etcd://" + strings.TrimPrefix(e.endpoint, "http://"),
		"--store=cassandra://" + e.cass + "/" + e.ks + "?rf=1",
		"--server-key=" + e.key,
		"--admin-token=" + adminTestToken,
		"--lease-ttl=" + leaseTTL.String(),
		"--retry-interval=500ms",
		"--rate-limits=false",
	}, extra...)
}

// setupCluster fails the test when CONCORD_CASSANDRA is unset, then builds
// the binary while it starts etcd and creates the keyspace (named
// concord_<prefix>_..., dropped at cleanup).
func setupCluster(t *testing.T, ctx context.Context, prefix string) clusterEnv {
	t.Helper()
	cass := needEnv(t, "CONCORD_CASSANDRA", "run `make test`, or "+
		"`export CONCORD_CASSANDRA=\"$(hack/cassandra/start.sh)\"` before go test -tags integration ./test/cluster/")
	bin := make(chan struct{})
	go func() { defer close(bin); buildBinary() }()

	stopEtcd, endpoint, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEtcd)
	ks := fmt.Sprintf("concord_%s_%d_%06x", prefix, time.Now().Unix(), rand.Uint32()&0xffffff)
	t.Cleanup(func() { dropKeyspace(t, cass, ks) })
	start := time.Now()
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{cass}, Keyspace: ks, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	st.Close()
	took := time.Since(start)
	<-bin
	concordBinary(t) // fails the test if the build did
	return clusterEnv{cass: cass, endpoint: endpoint, ks: ks, schemaTook: took, key: fmt.Sprintf("%064x", rand.Uint64())}
}
