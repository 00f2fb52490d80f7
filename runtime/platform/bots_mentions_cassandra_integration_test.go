//go:build integration

package platform

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// TestInteractionReplyMentionCountsOnCassandra is
// TestInteractionReplyMentionCounts on the Cassandra store, whose
// transactional outbox is a logged batch with an outbox row: the reply's
// event is committed in that batch and its mention counted.
func TestInteractionReplyMentionCountsOnCassandra(t *testing.T) {
	cass := os.Getenv("CONCORD_CASSANDRA")
	if cass == "" {
		t.Fatal("CONCORD_CASSANDRA is not set: start Cassandra with hack/cassandra/start.sh and export what it prints")
	}
	ks := fmt.Sprintf("concord_botmention_%d_%06x", time.Now().Unix(), rand.Uint32()&0xffffff)
	t.Cleanup(func() {
		c := gocql.NewCluster(cass)
		c.Timeout = time.Minute
		if s, err := c.CreateSession(); err == nil {
			_ = s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	testInteractionReplyMentionCounts(t, func(c *Config) {
		c.Store = "cassandra://" + cass + "/" + ks + "?rf=1"
		c.Registry = "mem"
	})
}
