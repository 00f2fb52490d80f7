package guild

import (
	"context"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// Visibility: one decision.
//
// Whether a user may see a channel — its id, its name, its events, its
// stored messages — is decided in one place and at the time of reading:
// permissions.AccessOf over the guild engine's effective permissions for
// guild channels (Actor.canView and Service.Visibility below), and
// membership of the recipient list for private channels
// (privateAccess). Nothing remembers an earlier answer: a decision is
// taken again for every read, inside the guild actor, so it is ordered
// with the role, overwrite and membership changes that move it.
//
// The paths that return stored content, and how each reaches the decision:
//
//   - REST message reads: GET /channels/{id}/messages and
//     /messages/{id} (runtime/edge/api history.go), through AuthorizeRead.
//   - Rendering any stored message for a caller — replies'
//     referenced_message, nonce replays, edit responses — goes through the
//     REST layer's per-request reader (runtime/edge/api reads.go), which asks
//     Visibility for each channel it renders from, referenced messages
//     included; a referenced message the caller cannot read now is
//     omitted (null), as Discord does.
//   - Channel objects: GET /channels/{id}, channel lists and GUILD_CREATE
//     (sortedChannels), and CHANNEL_CREATE / UPDATE / DELETE after a
//     permission change (syncVisibility): canView.
//   - Gateway fan-out of MESSAGE_CREATE / UPDATE / DELETE, TYPING_START and
//     channel events: canView per subscriber, in the actor, at fan-out.
//   - Member lists (lazy GUILD_MEMBER_LIST_UPDATE) and their per-channel
//     membership: canView through memberlist.ViewerFunc.
//   - Mentions: only users who see the channel are mentioned (send.go).
//   - Read states and mention counts: CanView (readstates.go).
//   - Private channels (DMs, READY's private_channels, their events):
//     privateAccess, the recipient list.
//   - Interactions (runtime/domain/bots): the invoking user's permissions from
//     this engine (Bots.ChannelPermissions), VIEW_CHANNEL required; a
//     component's message is read only from that channel, and an
//     interaction's webhook reads only the interaction's own messages.
//
//   - Pins and reactions (runtime/edge/api pins.go, reactions.go): Visibility
//     and the REST reader; CHANNEL_PINS_UPDATE and MESSAGE_REACTION_* go
//     out through broadcastChannel, so canView.
//   - Threads (threads.go): decide computes a thread from its parent
//     with the thread rules, so canView, channelFor and Visibility cover
//     every thread route, list and event (THREAD_* through syncVisibility).
//   - Webhooks (webhooks.go): AuthorizeWebhooks is channelFor and then
//     MANAGE_WEBHOOKS through the grant check; WEBHOOKS_UPDATE through
//     broadcastChannel; executed messages mention only users who canView.
//
// Routes Discord has and Concord does not yet (message snapshots, search,
// interaction resolved data) must join this list, through Visibility or
// canView, when they are added.
//
// Stored content the gateway replays on RESUME was decided at fan-out,
// in the guild's event order, before any later CHANNEL_DELETE the same
// replay carries; an edit made after a user lost the channel is never
// fanned out to them, so a replay shows nothing they could not see when
// it happened.

// ReadView is a Visibility decision: the channel and what the user may
// read of it now.
type ReadView struct {
	Channel store.Channel
	// Access is Visible or Readable (Hidden is returned as an error).
	Access permissions.Access
	// Permissions are the user's effective permissions in the channel.
	Permissions permissions.Bits
}

// Visibility decides what userID may read of channelID at this moment. A
// channel the user cannot see fails with ErrMissingAccess (REST's 50001),
// one that does not exist with ErrUnknownChannel.
func (s *Service) Visibility(ctx context.Context, userID, channelID snowflake.ID) (ReadView, error) {
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return ReadView{}, err
	}
	if guildID == 0 {
		c, err := s.private.authorize(ctx, userID, channelID)
		if err != nil {
			return ReadView{}, err
		}
		return ReadView{Channel: c, Access: permissions.AccessOf(privatePermissions), Permissions: privatePermissions}, nil
	}
	var out ReadView
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, channelID, 0)
		if err != nil {
			return err
		}
		out = ReadView{Channel: v.Channel, Access: permissions.AccessOf(v.Permissions), Permissions: v.Permissions}
		return nil
	})
	return out, err
}

// canView is the in-actor form of the decision: whether a user sees a
// guild channel now. It goes through decide, so the shadow check samples
// fan-out decisions too.
func (a *Actor) canView(userID, channelID snowflake.ID) bool {
	return permissions.AccessOf(a.decide(permissions.DecisionFanout, userID, channelID)).CanView()
}

// visibleChannels lists the channels a user sees now.
func (a *Actor) visibleChannels(userID snowflake.ID) map[snowflake.ID]bool {
	out := make(map[snowflake.ID]bool)
	for id := range a.channels {
		if a.canView(userID, id) {
			out[id] = true
		}
	}
	return out
}

// privateAccess is the decision for a private channel: its recipients
// read it, nobody else sees it.
func privateAccess(c store.Channel, userID snowflake.ID) error {
	if !slices.Contains(c.Recipients, userID) {
		return fmt.Errorf("private channel %d: %w", c.ID, ErrMissingAccess)
	}
	return nil
}
