package guild

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// MaxPins is Discord's limit of pinned messages per channel.
const MaxPins = 50

// ErrMaxPins refuses a pin in a channel that has MaxPins pinned messages.
var ErrMaxPins = errors.New("guild: maximum number of pins reached")

// Pin pins (pin set) or unpins a stored message for userID, in one
// step of the channel's guild actor: the check — VIEW_CHANNEL, and
// PIN_MESSAGES or MANAGE_MESSAGES (which Discord still honours) in a guild
// channel —, the message (store.ErrNotFound when there is none), an
// archived thread's pins that do not change (ErrThreadArchived), at most
// MaxPins (ErrMaxPins; pinning a pinned message is no change); then the
// pin, the message's pinned flag and CHANNEL_PINS_UPDATE. It returns the
// message and whether the channel's pins changed. In a private channel
// the check and the event are two steps of the private-channel router,
// as for Messages.Create.
func (ms *Messages) Pin(ctx context.Context, userID, channelID, messageID snowflake.ID, pin bool) (m store.Message, changed bool, err error) {
	s := ms.s
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return m, false, err
	}
	if guildID == 0 {
		if _, err := s.private.authorize(ctx, userID, channelID); err != nil {
			return m, false, err
		}
		wctx, cancel := writeContext(ctx)
		defer cancel()
		m, ev, changed, err := s.pin(wctx, 0, channelID, messageID, pin, false)
		if err != nil || !changed {
			return m, changed, err
		}
		if err := s.private.publish(wctx, channelID, "CHANNEL_PINS_UPDATE", ev, IntentDirectMessages); err != nil {
			s.log.Warn("pins update not published", "channel_id", channelID, "err", err)
		}
		return m, true, nil
	}
	err = s.write(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, channelID, 0)
		if err != nil {
			return err
		}
		if !v.Permissions.Has(permissions.PinMessages) && !v.Permissions.Has(permissions.ManageMessages) {
			return fmt.Errorf("pin in %d: %w", channelID, ErrMissingPermissions)
		}
		wctx, cancel := writeContext(ctx)
		defer cancel()
		var ev wire.ChannelPinsUpdate
		archived := v.Channel.Thread != nil && v.Channel.Thread.Archived
		m, ev, changed, err = a.svc.pin(wctx, a.id, channelID, messageID, pin, archived)
		if err != nil || !changed {
			return err
		}
		a.broadcastChannel(context.WithoutCancel(ctx), "CHANNEL_PINS_UPDATE", channelID, ev, IntentGuilds)
		return nil
	})
	return m, changed, err
}

// pin reads the message, refuses a change to the pins of an archived
// thread, and pins or unpins the message with its pinned flag; ev is the
// CHANNEL_PINS_UPDATE to send when changed.
func (s *Service) pin(ctx context.Context, guildID, channelID, messageID snowflake.ID, pin, archived bool) (m store.Message, ev wire.ChannelPinsUpdate, changed bool, err error) {
	st := s.deps.Store
	if m, err = st.GetMessage(ctx, channelID, messageID); err != nil {
		return m, ev, false, storeErr(fmt.Sprintf("message %d", messageID), err)
	}
	if archived {
		return m, ev, false, fmt.Errorf("pins of thread %d: %w", channelID, ErrThreadArchived)
	}
	ev = wire.ChannelPinsUpdate{GuildID: guildID, ChannelID: channelID}
	if pin {
		pins, err := st.ListPins(ctx, channelID)
		if err != nil {
			return m, ev, false, storeErr("pins", err)
		}
		if len(pins) >= MaxPins {
			if slices.ContainsFunc(pins, func(p store.Pin) bool { return p.MessageID == messageID }) {
				return m, ev, false, nil
			}
			return m, ev, false, fmt.Errorf("pin in %d: %w", channelID, ErrMaxPins)
		}
		now := s.cfg.Now()
		added, err := st.PinMessage(ctx, channelID, messageID, now)
		if err != nil || !added {
			return m, ev, false, storeErrOrNil("pin", err)
		}
		ts := wire.Timestamp(now)
		ev.LastPinTimestamp = &ts
	} else {
		removed, err := st.UnpinMessage(ctx, channelID, messageID)
		if err != nil || !removed {
			return m, ev, false, storeErrOrNil("unpin", err)
		}
		if pins, err := st.ListPins(ctx, channelID); err == nil && len(pins) > 0 {
			ts := wire.Timestamp(pins[0].PinnedAt)
			ev.LastPinTimestamp = &ts
		}
	}
	// The message's pinned flag follows the pin list.
	cur, err := st.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return m, ev, false, storeErr(fmt.Sprintf("message %d", messageID), err)
	}
	cur.Pinned = pin
	if err := st.PutMessage(ctx, cur); err != nil {
		return m, ev, false, storeErr(fmt.Sprintf("message %d", messageID), err)
	}
	return cur, ev, true, nil
}

// storeErrOrNil is storeErr, nil for nil.
func storeErrOrNil(what string, err error) error {
	if err == nil {
		return nil
	}
	return storeErr(what, err)
}
