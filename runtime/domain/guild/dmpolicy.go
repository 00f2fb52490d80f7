package guild

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// ErrCannotMessageUser means the recipient does not accept direct
// messages from the sender: they share no guild (REST's 50007 "Cannot
// send messages to this user").
var ErrCannotMessageUser = errors.New("guild: cannot send messages to this user")

// mayDM reports whether userID may open a DM with (or add to a group DM)
// recipientID: Discord allows it only between users who share a guild or
// are friends. Concord has no way to become friends over the API, so a
// shared guild is the rule; a user may always message themselves.
func (s *Service) mayDM(ctx context.Context, userID, recipientID snowflake.ID) error {
	if userID == recipientID {
		return nil
	}
	mine, err := s.deps.Store.UserGuilds(ctx, userID)
	if err != nil {
		return storeErr("dm policy", err)
	}
	if len(mine) == 0 {
		return fmt.Errorf("dm %d → %d: %w", userID, recipientID, ErrCannotMessageUser)
	}
	theirs, err := s.deps.Store.UserGuilds(ctx, recipientID)
	if err != nil {
		return storeErr("dm policy", err)
	}
	for _, g := range theirs {
		if slices.Contains(mine, g) {
			return nil
		}
	}
	return fmt.Errorf("dm %d → %d: %w", userID, recipientID, ErrCannotMessageUser)
}

// maySendPrivate applies the DM policy at send time: in a one-to-one DM
// the sender must still share a guild with the other user (a DM opened
// while they did stays readable, but not writable, once they part; the
// author's own messages stay editable). A group DM's members were
// admitted by its owner and may keep talking.
func (s *Service) maySendPrivate(ctx context.Context, c store.Channel, sender snowflake.ID) error {
	if c.Type != store.ChannelDM {
		return nil
	}
	for _, r := range c.Recipients {
		if r != sender {
			return s.mayDM(ctx, sender, r)
		}
	}
	return nil
}
