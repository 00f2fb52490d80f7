//go:build integration

package platform

import (
	"testing"
)

// TestInteractionReplyMentionCountsOnCassandra is
// TestInteractionReplyMentionCounts on the Cassandra store, whose
// transactional outbox is a logged batch with an outbox row: the reply's
// event is committed in that batch and its mention counted.
func TestInteractionReplyMentionCountsOnCassandra(t *testing.T) {
	store := freshKeyspaceStore(t, "botmention")
	testInteractionReplyMentionCounts(t, func(c *Config) {
		c.Store = store
		c.Registry = "mem"
	})
}
