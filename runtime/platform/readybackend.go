package platform

import (
	"context"
	"encoding/json"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/readstate"
	"github.com/concord-chat/concord/runtime/snowflake"
)

// readStateLister lists a user's read states for READY.
type readStateLister interface {
	States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error)
}

// readyWithStates adds the user's read states to READY, so a client knows
// its unread channels and mention counts (unread = the channel's
// last_message_id above the state's last_message_id) without any count
// query against the messages table.
type readyWithStates struct {
	gateway.Backend
	states readStateLister
}

// Identify implements gateway.Backend. A read-state failure leaves
// read_state empty rather than failing the identify: badges catch up on
// the next ack.
func (b readyWithStates) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	r, err := b.Backend.Identify(ctx, token, s)
	if err != nil {
		return r, err
	}
	entries, err := b.states.States(ctx, r.UserID, nil)
	if err != nil || entries == nil {
		entries = []readstate.State{}
	}
	r.ReadState, _ = json.Marshal(map[string]any{"entries": entries, "partial": false, "version": 1})
	return r, nil
}
