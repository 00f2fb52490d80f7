package dev

import (
	"fmt"
	"testing"

	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestDeletingAMentionLowersTheCount: on `concord dev`, a user mentioned
// by three messages has a count of three; deleting one (DELETE) lowers it
// to two and a bulk delete of the other two to zero: each delete's event,
// committed with the deletion, carries the mentions the message was
// stored with.
func TestDeletingAMentionLowersTheCount(t *testing.T) {
	p, addr := startTestPlatform(t)
	alice, bob, _, ch := guildOfTwo(t, addr, "deletes")

	ids := make([]string, 3)
	for i := range ids {
		var m struct {
			ID string `json:"id"`
		}
		resttest.Call(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/messages",
			map[string]any{"content": fmt.Sprintf("%d <@%s>", i, bob.UserID)}, &m)
		ids[i] = m.ID
	}
	bobID, _ := snowflake.Parse(bob.UserID)
	chID, _ := snowflake.Parse(ch.ID)
	await := func(what string, want int) { awaitMentionCount(t, p, what, bobID, chID, want) }
	await("three mentions", 3)
	resttest.Call(t, addr, alice.Token, "DELETE", "/channels/"+ch.ID+"/messages/"+ids[0], nil, nil)
	await("one mentioning message deleted", 2)
	resttest.Call(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/messages/bulk-delete", map[string]any{"messages": ids[1:]}, nil)
	await("the other two bulk-deleted", 0)
}
