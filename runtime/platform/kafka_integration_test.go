//go:build integration

package platform

import (
	"os"
	"testing"
)

// TestAckClearsBadgeOnKafka runs the two-device read-state scenario with
// `--eventlog=kafka://...` against the real Kafka `make test` starts.
func TestAckClearsBadgeOnKafka(t *testing.T) {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		t.Fatal("CONCORD_KAFKA is not set: run `make test` (or hack/kafka/kafka.sh start)")
	}
	testAckClearsBadge(t, func(c *Config) { c.EventLog = "kafka://" + addr })
}
