//go:build integration

package cluster

import (
	"encoding/json"
	"testing"
	"time"
)

// readState is one entry of READY's read_state.
type readState struct {
	ID           string `json:"id"`
	LastReadID   string `json:"last_message_id"`
	MentionCount int    `json:"mention_count"`
}

// readyState identifies a new session of u on the gateway at addr and
// returns READY's read state of channel (zero when READY has none).
func readyState(t *testing.T, name, addr string, u clusterUser, channel string, timeout time.Duration) readState {
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
