//go:build integration

package cassandrastore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/cassandrastore"
	"github.com/concord-chat/concord/runtime/domain/live/commentstore/storetest"
)

// Open returns a Store in a fresh keyspace of the CONCORD_CASSANDRA
// server, dropped when the test ends; it fails, never skips, without one.
func Open(t testing.TB) *cassandrastore.Store {
	addr := os.Getenv("CONCORD_CASSANDRA")
	if addr == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: run `make test-deps` and source ~/.cache/concord/test-env.sh")
	}
	ks := fmt.Sprintf("concord_live_test_%d_%08x", time.Now().Unix(), rand.Uint32())
	ctx := context.Background()
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{addr}, Keyspace: ks, ReplicationFactor: 1, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		c := gocql.NewCluster(addr)
		c.Timeout = time.Minute
		if s, err := c.CreateSession(); err == nil {
			s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	s, err := cassandrastore.New(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, Open(t)) }
