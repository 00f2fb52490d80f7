// Package storetest is the storage conformance suite: the behaviours every
// store.Store adapter must have, as table-driven tests, and history-read
// benchmarks.
//
// The suite never assumes an empty database and cleans nothing up: every
// subtest works on fresh random channel, guild and user ids and random
// usernames, so it can run against a shared, long-lived database (a real
// Cassandra cluster) and subtests run in parallel.
//
// It assumes the adapter uses store.DefaultBucketWidth (Buckets results are
// compared with store.Bucket(id, store.DefaultBucketWidth)) and that time
// values survive at millisecond precision (they are compared in UTC,
// truncated to milliseconds). Empty and nil slices are equal.
//
// History semantics pinned by the suite (see testPaging):
//   - Limit 0 is 50; other limits are clamped to 1..100 (negative → 1).
//   - Every page is newest first; Before and After are exclusive; a zero
//     cursor means "no cursor" (the newest page).
//   - After returns the limit messages right after the cursor.
//   - Around includes the message itself when it exists; of the remaining
//     limit-1 slots (limit when it does not exist) ⌊rest/2⌋ go to newer
//     messages and the rest to older ones, and at either end of the history
//     the other side takes the slots the short side cannot fill.
//   - Deleting an unknown message, channel, role, member, invite or guild
//     is store.ErrNotFound; DeleteMessages ignores unknown ids.
//   - DeleteGuild removes the guild's channels, roles, members (and their
//     UserGuilds entries) and invites.
package storetest

import (
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// Run runs the conformance suite against the store newStore returns; it is
// called once per group (Messages, Guilds, Users), and the store closed at
// the end of the group.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	groups := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"Messages", testMessages},
		{"Guilds", testGuilds},
		{"Users", testUsers},
		{"Moderation", testModeration},
		{"Webhooks", testWebhooks},
		{"Outbox", testOutbox},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			g.fn(t, s)
		})
	}
}
