//go:build integration

package livetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	countersredis "github.com/concord-chat/concord/runtime/adapters/counters/redis"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/kafka"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/cassandrastore"
	"github.com/concord-chat/concord/runtime/domain/live/recent/redisrecent"
	"github.com/concord-chat/concord/runtime/domain/live/relay/redisrelay"
)

// env reads a test server address; it fails, never skips, without one.
func env(t testing.TB, names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	t.Fatalf("%v not set: run `make test-deps` and source ~/.cache/concord/test-env.sh", names)
	return ""
}

// RealBackends connects to Kafka (CONCORD_KAFKA), Redis (CONCORD_REDIS or
// CONCORD_TEST_REDIS) and Cassandra (CONCORD_CASSANDRA, a fresh keyspace
// dropped afterwards, holding the comments and the accounts), with an embedded etcd server as the board, all
// under names unique to this run. Every client is its own, as separate
// processes would have.
func RealBackends(t testing.TB) Backends {
	ctx := context.Background()
	run := fmt.Sprintf("live%d%04x", time.Now().UnixNano()%1e9, rand.Uint32()&0xffff)
	kl, err := kafka.New(ctx, kafka.Config{Brokers: []string{env(t, "CONCORD_KAFKA")}, Partitions: 4, SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kl.Close() })
	raddr := env(t, "CONCORD_REDIS", "CONCORD_TEST_REDIS")
	cache, err := redisrecent.New(ctx, redisrecent.Config{Addr: raddr, Prefix: run + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	rl, err := redisrelay.New(ctx, redisrelay.Config{Addr: raddr, Prefix: run + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	ctr, err := countersredis.New(ctx, countersredis.Config{Addr: raddr, Prefix: run + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctr.Close() })
	caddr := env(t, "CONCORD_CASSANDRA")
	ks := "concord_" + run
	cs, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{caddr}, Keyspace: ks, ReplicationFactor: 1, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		c := gocql.NewCluster(caddr)
		c.Timeout = time.Minute
		if s, err := c.CreateSession(); err == nil {
			s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	store, err := cassandrastore.New(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	stop, endpoint, err := etcd.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, Prefix: "/" + run + "/"})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reg.Close()
		stop()
	})
	return Backends{Log: kl, Cache: cache, Store: store, Relay: rl, Board: reg, Counters: ctr, Users: cs, Topics: live.TopicsFor(run + "."),
		RedisPrefix: run + ":"}
}
