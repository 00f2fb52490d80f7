//go:build integration

package dev

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// freshKeyspaceStore returns the --store URL of a keyspace of its own on
// the test's Cassandra (CONCORD_CASSANDRA), named
// concord_<prefix>_<time>_<random> and dropped when the test ends; it
// fails the test when CONCORD_CASSANDRA is unset.
func freshKeyspaceStore(t *testing.T, prefix string) string {
	t.Helper()
	cass := os.Getenv("CONCORD_CASSANDRA")
	if cass == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: start Cassandra with hack/cassandra/start.sh and export what it prints")
	}
	ks := fmt.Sprintf("concord_%s_%d_%06x", prefix, time.Now().Unix(), rand.Uint32()&0xffffff)
	t.Cleanup(func() {
		c := gocql.NewCluster(cass)
		c.Timeout = time.Minute
		if s, err := c.CreateSession(); err == nil {
			_ = s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	return "cassandra://" + cass + "/" + ks + "?rf=1"
}
