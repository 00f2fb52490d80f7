//go:build integration

package dev

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/concord-chat/concord/runtime/config"
)

// TestAckClearsBadgeOnKafka runs the two-device read-state scenario with
// `--eventlog=kafka://...` against the real Kafka `make test` starts.
func TestAckClearsBadgeOnKafka(t *testing.T) {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		t.Fatal("CONCORD_KAFKA is not set: run `make test` (or hack/kafka/kafka.sh start)")
	}
	// Its own consumer group: test/cluster's read-state node may consume
	// the same topic at the same time (packages run in parallel), and one
	// group would split the partitions between the two processes.
	group := fmt.Sprintf("readstate-platform-test-%x", rand.Uint64())
	testAckClearsBadge(t, func(c *config.Config) { c.EventLog = "kafka://" + addr; c.ReadStateGroup = group })
}
