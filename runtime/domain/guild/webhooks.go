package guild

import (
	"context"
	"fmt"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// IntentGuildWebhooks carries WEBHOOKS_UPDATE.
const IntentGuildWebhooks uint64 = 1 << 5

// webhookChannel reports whether a webhook may live in a channel of type
// typ: text, voice (its text chat) and announcement channels; threads are
// reached through their parent's webhooks (thread_id).
func webhookChannel(typ int) bool {
	return typ == store.ChannelText || typ == store.ChannelVoice || typ == channelAnnouncement
}

// channelAnnouncement is Discord's announcement (news) channel type.
const channelAnnouncement = 5

// AuthorizeWebhooks decides whether userID may create, list, change or
// delete the webhooks of channelID: the channel must be visible to the
// user now (the visibility decision: hidden is ErrMissingAccess) and the
// user must hold MANAGE_WEBHOOKS in it, asked through the grant check (a
// webhook posts into the channel on its creator's authority). It returns
// the channel.
func (cs *Channels) AuthorizeWebhooks(ctx context.Context, userID, channelID snowflake.ID) (store.Channel, error) {
	s := cs.s
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return store.Channel{}, err
	}
	if guildID == 0 {
		return store.Channel{}, fmt.Errorf("private channel %d has no webhooks: %w", channelID, ErrWrongChannelType)
	}
	var out store.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, channelID, 0)
		if err != nil {
			return err
		}
		if err := a.mayGrant(permissions.Grant{Actor: userID, Channel: channelID, Need: permissions.ManageWebhooks}); err != nil {
			return err
		}
		if !webhookChannel(v.Channel.Type) {
			return fmt.Errorf("channel %d type %d: %w", channelID, v.Channel.Type, ErrWrongChannelType)
		}
		out = v.Channel
		return nil
	})
	return out, err
}

// WebhookChannels returns the channels of a guild whose webhooks userID
// may list: MANAGE_WEBHOOKS at guild level, then only the channels the
// user sees now and holds MANAGE_WEBHOOKS in (an overwrite can take it
// away in one channel).
func (cs *Channels) WebhookChannels(ctx context.Context, userID, guildID snowflake.ID) (map[snowflake.ID]bool, error) {
	s := cs.s
	var out map[snowflake.ID]bool
	err := s.do(ctx, guildID, func(a *Actor) error {
		if err := a.guildPerms(userID, permissions.ManageWebhooks); err != nil {
			return err
		}
		out = make(map[snowflake.ID]bool)
		for id, c := range a.channels {
			if !webhookChannel(c.Type) {
				continue
			}
			if p := a.decide(permissions.DecisionRead, userID, id); permissions.AccessOf(p).CanView() && p.Has(permissions.ManageWebhooks) {
				out[id] = true
			}
		}
		return nil
	})
	return out, err
}

// WebhookSend is a webhook execution to authorise (authorizeWebhookSend).
type WebhookSend struct {
	// GuildID and ChannelID are the webhook's.
	GuildID   snowflake.ID
	ChannelID snowflake.ID
	// ThreadID, when set, posts into that thread of the channel.
	ThreadID snowflake.ID
	// MentionsEveryone, Users and Roles are what the content mentions and
	// allowed_mentions lets ping.
	MentionsEveryone bool
	Users            []snowflake.ID
	Roles            []snowflake.ID
}

// authorizeWebhookSend checks a webhook execution (CheckWebhook): the
// channel (or the thread of it named by ThreadID) must exist and take
// messages; an archived thread is unarchived by the post unless it is
// locked (50083). A webhook pings as Discord's do — @everyone and any
// role when allowed_mentions lets it — but a user is mentioned only when
// they see the channel now, so a mention never leaks a hidden channel.
func (a *Actor) authorizeWebhookSend(ctx context.Context, req WebhookSend) (SendGrant, error) {
	c := a.channels[req.ChannelID]
	if c == nil || !webhookChannel(c.Type) {
		return SendGrant{}, fmt.Errorf("webhook channel %d: %w", req.ChannelID, ErrUnknownChannel)
	}
	target := c
	if req.ThreadID != 0 {
		th := a.channels[req.ThreadID]
		if th == nil || th.Thread == nil || th.ParentID != c.ID {
			return SendGrant{}, fmt.Errorf("thread %d of %d: %w", req.ThreadID, c.ID, ErrUnknownChannel)
		}
		if th.Thread.Archived {
			if th.Thread.Locked {
				return SendGrant{}, fmt.Errorf("thread %d: %w", th.ID, ErrThreadArchived)
			}
			if err := a.setArchived(ctx, th.ID, false); err != nil {
				return SendGrant{}, err
			}
			th = a.channels[req.ThreadID]
		}
		target = th
	}
	g := SendGrant{GuildID: a.id, Channel: cloneChannel(*target), MentionEveryone: req.MentionsEveryone,
		Users: []snowflake.ID{}, Roles: []snowflake.ID{}}
	for _, u := range req.Users {
		if _, ok := a.members[u]; ok && a.canView(u, target.ID) && !slices.Contains(g.Users, u) {
			g.Users = append(g.Users, u)
		}
	}
	for _, id := range req.Roles {
		if _, ok := a.roles[id]; ok && id != a.id && !slices.Contains(g.Roles, id) {
			g.Roles = append(g.Roles, id)
		}
	}
	return g, nil
}

// PublishWebhooksUpdate sends WEBHOOKS_UPDATE for a channel to the
// sessions that see it and asked for GUILD_WEBHOOKS.
func (cs *Channels) PublishWebhooksUpdate(ctx context.Context, guildID, channelID snowflake.ID) error {
	s := cs.s
	return s.Messages.PublishEvent(ctx, guildID, channelID, "WEBHOOKS_UPDATE",
		wire.WebhooksUpdate{GuildID: guildID, ChannelID: channelID}, IntentGuildWebhooks, 0)
}
