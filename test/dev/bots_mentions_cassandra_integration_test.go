//go:build integration

package dev

import (
	"testing"

	"github.com/concord-chat/concord/runtime/config"
)

// TestInteractionReplyMentionCountsOnCassandra is
// TestInteractionReplyMentionCounts on the Cassandra store, whose
// transactional outbox is a logged batch with an outbox row: the reply's
// event is committed in that batch and its mention counted.
func TestInteractionReplyMentionCountsOnCassandra(t *testing.T) {
	store := freshKeyspaceStore(t, "botmention")
	testInteractionReplyMentionCounts(t, func(c *config.Config) {
		c.Store = store
		c.Registry = "mem"
	})
}
