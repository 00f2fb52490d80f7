//go:build integration

package livetest_test

import (
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestContractOnRealServers runs the HTTP contract with Kafka as the event
// log, Redis as the recent cache, relay and counters, Cassandra as the
// comments store and etcd as the board.
func TestContractOnRealServers(t *testing.T) {
	// One set of servers for both runs of the suite (the Cassandra schema
	// is the slow part); each run has its own topics.
	b := livetest.RealBackends(t)
	run := 0
	livetest.Contract(t, func(t *testing.T, o livetest.Options) *livetest.Env {
		run++
		rb := b
		rb.Topics = live.TopicsFor(fmt.Sprintf("%s%d.", b.Topics.Comments, run))
		return livetest.Start(t, rb, o)
	})
}
