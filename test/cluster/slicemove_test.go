//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestSlicedGuildMoveKeepsFocus runs a relay node, two guild nodes with
// --relay-threshold=2 and a gateway+api node. A guild of 52 members (so
// a user session at the default large_threshold of 50 is passive) has
// three sessions, handed to the relay: one sent op 14 for the channel
// (active in it), two did not (passive). The guild node owning the guild
// is killed with SIGKILL; the ring moves the guild to the other guild
// node, the gateway subscribes the sessions there (a fresh GUILD_CREATE)
// and replays the active session's op 14 (transport.RememberFocus). The
// next message reaches the active session without it sending op 14 again,
// and not the passive ones — which fails when the new owner starts
// without the session's active channels.
func TestSlicedGuildMoveKeepsFocus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sg := startSlicedGuild(t, ctx, "slicemove", 51)
	relay, app := sg.relay, sg.app
	api, owner, members, guildID, channelID := sg.api, sg.owner, sg.members, sg.guildID, sg.channelID
	node, victim := sg.ownerNode, sg.victim

	active := dial(t, "active", app.http, members[0].token)
	passive := []*wsSession{dial(t, "passive-1", app.http, members[1].token), dial(t, "passive-2", app.http, members[2].token)}
	for _, s := range append([]*wsSession{active}, passive...) {
		s.await(t, "GUILD_CREATE", 20*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) >= 1 })
	}
	focus := map[string]any{"op": 14, "d": map[string]any{"guild_id": guildID, "channels": map[string]any{channelID: [][]int{{0, 99}}}}}
	active.send(t, focus)

	// post sends a message as the owner, retrying while the guild moves,
	// and returns its id.
	post := func(content string) string {
		t.Helper()
		limit := time.Now().Add(60 * time.Second)
		for {
			var m struct {
				ID string `json:"id"`
			}
			status, raw, err := api.do(ctx, owner.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": content}, nil)
			if err == nil && status == 200 && json.Unmarshal(raw, &m) == nil && m.ID != "" {
				return m.ID
			}
			if time.Now().After(limit) {
				t.Fatalf("post %q: %d %s %v", content, status, raw, err)
			}
			<-time.After(250 * time.Millisecond) // the guild is moving: nothing to await but the retry
		}
	}
	gotMessage := func(fs []dispatch, id string) bool {
		for _, f := range fs {
			var m struct {
				ID string `json:"id"`
			}
			if f.Type == "MESSAGE_CREATE" && json.Unmarshal(f.D, &m) == nil && m.ID == id {
				return true
			}
		}
		return false
	}
	// The op 14 reaches the owner on its own path: post until the
	// active session gets a message in full (a passive one would not).
	var before string
	for i := 0; ; i++ {
		before = post(fmt.Sprintf("before the move %d", i))
		err := active.Await("a message in the channel its op 14 named", 5*time.Second, func(fs []dispatch) bool { return gotMessage(fs, before) })
		if err == nil {
			break
		}
		if i == 5 {
			t.Fatalf("the active session got none of 6 messages: %v\n%s", err, victim.output())
		}
	}
	if metric(t, relay.http, "concord_transport_slice_received_entries_total") == 0 {
		t.Fatalf("the relay received no slice entries: the 3 sessions were not handed to it\n%s", victim.output())
	}

	victim.kill()
	t.Logf("killed %s, the guild's owner", node)
	for _, s := range append([]*wsSession{active}, passive...) {
		s.await(t, "GUILD_CREATE from the new owner", 60*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) >= 2 })
	}
	after := post("after the move")
	active.await(t, "the message after the move, in the channel its op 14 named before it", 20*time.Second, func(fs []dispatch) bool { return gotMessage(fs, after) })
	// The passive sessions get the message as a badge: a
	// PASSIVE_UPDATE_V1 naming it as the channel's last message, and no
	// MESSAGE_CREATE for it.
	badge := func(fs []dispatch) bool {
		for _, f := range fs {
			var u struct {
				Channels []struct {
					ID            string `json:"id"`
					LastMessageID string `json:"last_message_id"`
				} `json:"channels"`
			}
			if f.Type != "PASSIVE_UPDATE_V1" || json.Unmarshal(f.D, &u) != nil {
				continue
			}
			for _, c := range u.Channels {
				if c.ID == channelID && c.LastMessageID == after {
					return true
				}
			}
		}
		return false
	}
	for _, s := range passive {
		s.await(t, "PASSIVE_UPDATE_V1 for the message after the move", 20*time.Second, badge)
		if fs := s.snapshot(); gotMessage(fs, after) || gotMessage(fs, before) {
			t.Errorf("%s is passive but got a channel message in full", s.name)
		}
	}
}
