package guild

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// CanView reports whether user may see channel (VIEW_CHANNEL, or being a
// recipient of a private channel). The read-state role uses it so a
// mention in a hidden channel never counts.
func (s *Service) CanView(ctx context.Context, user, channel snowflake.ID) bool {
	v, err := s.Visibility(ctx, user, channel)
	return err == nil && v.Access.CanView()
}

// RoleMembers lists the members holding role in guild (role mentions).
func (s *Service) RoleMembers(ctx context.Context, guildID, roleID snowflake.ID) ([]snowflake.ID, error) {
	var out []snowflake.ID
	err := s.do(ctx, guildID, func(a *Actor) error {
		for id, m := range a.members {
			if roleID == guildID || slices.Contains(m.Roles, roleID) {
				out = append(out, id)
			}
		}
		return nil
	})
	return out, err
}

// DispatchToUser sends one dispatch to every subscribed session of a user,
// for events addressed to a person rather than a guild (MESSAGE_ACK).
func (s *Service) DispatchToUser(ctx context.Context, userID snowflake.ID, eventType string, payload json.RawMessage) {
	byNode := map[string][]event.Target{}
	for _, sess := range s.userSessions(ctx, userID) {
		byNode[sess.Node] = append(byNode[sess.Node], event.Target{Session: sess.ID})
	}
	for node, targets := range byNode {
		s.deps.Sink.Deliver(ctx, node, event.Batch{Type: eventType, Payloads: []json.RawMessage{payload}, Targets: targets})
	}
}
