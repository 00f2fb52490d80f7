//go:build integration

package cluster

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// readState is one entry of READY's read_state.
type readState struct {
	ID           string `json:"id"`
	LastReadID   string `json:"last_message_id"`
	MentionCount int    `json:"mention_count"`
}

// newShardUser registers a user through api and returns its token and id.
func newShardUser(t *testing.T, api rest, prefix string) shardUser {
	t.Helper()
	var reg struct {
		Token string `json:"token"`
	}
	api.must(t, "", "POST", "/auth/register", map[string]any{"username": fmt.Sprintf("%s_%x", prefix, rand.Uint32()), "password": "correct-horse-1"}, &reg)
	var me struct {
		ID string `json:"id"`
	}
	api.must(t, reg.Token, "GET", "/users/@me", nil, &me)
	return shardUser{reg.Token, me.ID}
}

// guildWithMembers creates a guild of owner with one text channel, which
// every member joins by invite, and returns the guild's and channel's ids.
func guildWithMembers(t *testing.T, api rest, owner shardUser, name string, members ...shardUser) (guildID, channelID string) {
	t.Helper()
	var g, ch struct {
		ID string `json:"id"`
	}
	api.must(t, owner.token, "POST", "/guilds", map[string]any{"name": name}, &g)
	api.must(t, owner.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "general", "type": 0}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	api.must(t, owner.token, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	for _, u := range members {
		api.must(t, u.token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	}
	return g.ID, ch.ID
}

// readyState identifies a new session of u on the gateway at addr and
// returns READY's read state of channel (zero when READY has none).
func readyState(t *testing.T, name, addr string, u shardUser, channel string, timeout time.Duration) readState {
	t.Helper()
	s := dial(t, name, addr, u.token)
	defer s.Close()
	var d struct {
		ReadState struct {
			Entries []readState `json:"entries"`
		} `json:"read_state"`
	}
	s.await(t, "READY", timeout, func(frames []dispatch) bool {
		for _, f := range frames {
			if f.Type == "READY" {
				if err := json.Unmarshal(f.D, &d); err != nil {
					t.Fatalf("READY: %v", err)
				}
				return true
			}
		}
		return false
	})
	for _, e := range d.ReadState.Entries {
		if e.ID == channel {
			return e
		}
	}
	return readState{}
}
