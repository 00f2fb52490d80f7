package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// ErrNotSubscribed is returned by MoveSession for a session the guild
// does not deliver to.
var ErrNotSubscribed = errors.New("guild: session not subscribed")

// Move asks to send one session's events to another gateway node: its
// draining node hands it to a successor (gateway.HandoffBackend).
type Move struct {
	// Session is the session to move.
	Session event.SessionID
	// To is the gateway node its events go to from now on.
	To string
	// ID identifies the move; it is the payload of the markers.
	ID string
}

// MoveSession switches a session's subscription to guildID, and its
// private-channel routing on this service, to gateway node m.To. Each
// source switches in its own order, then sends the node it delivered to
// before an event.MoveMarker batch for the session (payload m.ID as a
// JSON string) through the Sink, after every earlier event it sent there:
// the guild's actor for the guild's events, the private router for
// private channels (only the first move of a session on this service
// switches it). So the old node has received every event it will ever
// get for the session once it has counted the markers, and every later
// event goes to m.To. It returns how many markers were sent. It fails
// with ErrNotSubscribed, ErrUnknownGuild or ErrUnavailable.
func (s *Service) MoveSession(ctx context.Context, guildID snowflake.ID, m Move) (markers int, err error) {
	if m.Session == "" || m.To == "" {
		return 0, fmt.Errorf("move session: %w: empty session or node", ErrInvalid)
	}
	marker := json.RawMessage(mustJSON(m.ID))
	err = s.do(ctx, guildID, func(a *Actor) error {
		sub := a.subs[m.Session]
		if sub == nil {
			return fmt.Errorf("move %s: %w", m.Session, ErrNotSubscribed)
		}
		from := sub.s.Node
		if from == m.To {
			return nil
		}
		sub.s.Node = m.To
		// The guild's own path (its relays, if it has a relay tier), so
		// the marker follows every earlier event to the old node.
		mb := newBatcher(event.MoveMarker, marker)
		mb.byNode[from] = []event.Target{{Session: m.Session}}
		mb.flushGuild(ctx, a)
		a.sliceMoved(ctx, sub.s)
		markers++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("guild %d: %w", guildID, err)
	}
	// Private channels: the router reads a session's node from its
	// entry when it delivers. Switch the entry, then send the marker
	// from the router's goroutine, after every delivery it made before.
	s.mu.Lock()
	e := s.sessions[m.Session]
	from := ""
	if e != nil && e.s.Node != m.To {
		from = e.s.Node
		e.s.Node = m.To
	}
	s.mu.Unlock()
	if from == "" {
		return markers, nil
	}
	err = s.private.do(context.WithoutCancel(ctx), func() error {
		s.deps.Sink.Deliver(ctx, from, event.Batch{Type: event.MoveMarker,
			Payloads: []json.RawMessage{marker}, Targets: []event.Target{{Session: m.Session}}})
		return nil
	})
	if err != nil {
		return markers, fmt.Errorf("move %s: private channels: %w", m.Session, err)
	}
	return markers + 1, nil
}
