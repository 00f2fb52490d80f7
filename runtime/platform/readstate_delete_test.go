package platform

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/snowflake"
)

// TestDeletingAMentionLowersTheCount: on `concord dev`, a user mentioned
// by three messages has a count of three; deleting one (DELETE) lowers it
// to two and a bulk delete of the other two to zero: each delete's event,
// committed with the deletion, carries the mentions the message was
// stored with.
func TestDeletingAMentionLowersTheCount(t *testing.T) {
	p, addr := startTestPlatform(t)
	var alice, bob struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	restCall(t, addr, "", "POST", "/auth/register", map[string]string{"username": "alice", "password": "alice password"}, &alice)
	restCall(t, addr, "", "POST", "/auth/register", map[string]string{"username": "bob", "password": "bob password!"}, &bob)
	var g, ch struct {
		ID string `json:"id"`
	}
	restCall(t, addr, alice.Token, "POST", "/guilds", map[string]string{"name": "deletes"}, &g)
	restCall(t, addr, alice.Token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "news"}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	restCall(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	restCall(t, addr, bob.Token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)

	ids := make([]string, 3)
	for i := range ids {
		var m struct {
			ID string `json:"id"`
		}
		restCall(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/messages",
			map[string]any{"content": fmt.Sprintf("%d <@%s>", i, bob.UserID)}, &m)
		ids[i] = m.ID
	}
	bobID, _ := snowflake.Parse(bob.UserID)
	chID, _ := snowflake.Parse(ch.ID)
	// The count is the read-state role's state, reached through the event
	// log: poll it (there is no event to await).
	await := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			st, err := p.readStates.Local().ChannelState(context.Background(), bobID, chID)
			if err != nil {
				t.Fatal(err)
			}
			if st.MentionCount == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: mention_count %d, want %d", what, st.MentionCount, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	await("three mentions", 3)
	restCall(t, addr, alice.Token, "DELETE", "/channels/"+ch.ID+"/messages/"+ids[0], nil, nil)
	await("one mentioning message deleted", 2)
	restCall(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/messages/bulk-delete", map[string]any{"messages": ids[1:]}, nil)
	await("the other two bulk-deleted", 0)
}
