package guild

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// SendRequest asks whether a user may post in a channel.
type SendRequest struct {
	UserID    snowflake.ID
	ChannelID snowflake.ID
	// MentionsEveryone is set when the content holds @everyone or @here
	// and allowed_mentions lets it ping.
	MentionsEveryone bool
	// Users and Roles are the ids mentioned in the content that
	// allowed_mentions lets ping.
	Users []snowflake.ID
	Roles []snowflake.ID
	// Edit resolves mentions for an edit: it checks VIEW_CHANNEL only and
	// leaves the slowmode clock alone.
	Edit bool
	// Attachments is set when the message carries files (ATTACH_FILES).
	Attachments bool
}

// SendGrant is a successful Messages.AuthorizeSend.
type SendGrant struct {
	GuildID snowflake.ID
	Channel store.Channel
	// Member is the author's partial member (nil in private channels).
	Member *wire.Member
	// MentionEveryone follows Discord: without MENTION_EVERYONE the message
	// is still sent, but it does not mention everyone.
	MentionEveryone bool
	// Users are the mentioned users who can see the channel: a hidden
	// channel never leaks through a mention.
	Users []snowflake.ID
	// Roles are the mentioned roles that exist and are mentionable (or the
	// author has MENTION_EVERYONE).
	Roles []snowflake.ID
}

// slowmodeBypass are the permissions that skip slowmode.
const slowmodeBypass = permissions.ManageMessages | permissions.ManageChannels | permissions.BypassSlowmode

// AuthorizeSend checks VIEW_CHANNEL, SEND_MESSAGES, MENTION_EVERYONE and
// slowmode in one actor step, and starts the slowmode clock on success.
// A slowmode refusal is a *SlowmodeError carrying RetryAfter.
func (ms *Messages) AuthorizeSend(ctx context.Context, req SendRequest) (SendGrant, error) {
	s := ms.s
	guildID, err := s.ChannelGuild(ctx, req.ChannelID)
	if err != nil {
		return SendGrant{}, err
	}
	if guildID == 0 {
		return s.private.authorizeSend(ctx, req)
	}
	var out SendGrant
	err = s.do(ctx, guildID, func(a *Actor) error {
		var err error
		out, err = a.authorizeSend(ctx, req)
		return err
	})
	return out, err
}

func (a *Actor) authorizeSend(ctx context.Context, req SendRequest) (SendGrant, error) {
	v, err := a.channelFor(req.UserID, req.ChannelID, 0)
	if err != nil {
		return SendGrant{}, err
	}
	c := v.Channel
	if c.Type != store.ChannelText && c.Type != store.ChannelVoice && c.Thread == nil {
		return SendGrant{}, fmt.Errorf("channel %d type %d: %w", c.ID, c.Type, ErrNotText)
	}
	if !req.Edit && !v.Permissions.Has(permissions.SendMessages) {
		return SendGrant{}, fmt.Errorf("send in %d: %w", c.ID, ErrMissingPermissions)
	}
	if req.Attachments && !v.Permissions.Has(permissions.AttachFiles) {
		return SendGrant{}, fmt.Errorf("attach files in %d: %w", c.ID, ErrMissingPermissions)
	}
	if !req.Edit && c.Thread != nil {
		if err := a.threadSend(ctx, a.channels[c.ID], req.UserID, v.Permissions); err != nil {
			return SendGrant{}, err
		}
	}
	now := a.svc.cfg.Now()
	if !req.Edit && c.RateLimitPerUser > 0 && v.Permissions&slowmodeBypass == 0 {
		k := slowKey{c.ID, req.UserID}
		if next, ok := a.slow[k]; ok && now.Before(next) {
			return SendGrant{}, fmt.Errorf("send in %d: %w", c.ID, &SlowmodeError{RetryAfter: next.Sub(now)})
		}
		a.slow[k] = now.Add(time.Duration(c.RateLimitPerUser) * time.Second)
	}
	m := wire.MemberFrom(*a.members[req.UserID], nil, now)
	g := SendGrant{
		GuildID:         a.id,
		Channel:         c,
		Member:          &m,
		MentionEveryone: req.MentionsEveryone && v.Permissions.Has(permissions.MentionEveryone),
		Users:           []snowflake.ID{},
		Roles:           []snowflake.ID{},
	}
	for _, u := range req.Users {
		if _, ok := a.members[u]; ok && a.canView(u, c.ID) && !slices.Contains(g.Users, u) {
			g.Users = append(g.Users, u)
		}
	}
	for _, id := range req.Roles {
		r, ok := a.roles[id]
		if !ok || id == a.id || slices.Contains(g.Roles, id) {
			continue
		}
		if r.Mentionable || v.Permissions.Has(permissions.MentionEveryone) {
			g.Roles = append(g.Roles, id)
		}
	}
	return g, nil
}

// Publish hands a stored message to its guild (or the private
// router) for MESSAGE_CREATE or MESSAGE_UPDATE fan-out; on create it
// advances the channel's last_message_id. It does not wait for delivery.
func (ms *Messages) Publish(ctx context.Context, typ string, m wire.Message) error {
	s := ms.s
	if m.GuildID == 0 {
		return s.private.publishMessage(ctx, typ, m)
	}
	// The work outlives the caller's context: it only bounds the enqueue.
	actx := context.WithoutCancel(ctx)
	return s.post(ctx, m.GuildID, func(a *Actor) { a.publishMessage(actx, typ, m) })
}

// publishMessage is the actor's part of MESSAGE_CREATE and MESSAGE_UPDATE:
// on create it advances the channel's last_message_id (and a thread's
// message_count), then it fans the message out.
func (a *Actor) publishMessage(ctx context.Context, typ string, m wire.Message) {
	c, ok := a.channels[m.ChannelID]
	if !ok {
		return
	}
	if typ == "MESSAGE_CREATE" && m.ID > c.LastMessageID {
		c.LastMessageID = m.ID
		// A thread's message_count leaves out its starter message (a
		// forum post's has the thread's id).
		if c.Thread != nil && m.Type != wire.MessageThreadStarter && m.ID != c.ID {
			a.threadMessage(ctx, c)
		}
	}
	if _, ok := a.channels[m.ChannelID]; !ok {
		return
	}
	a.fanoutMessage(ctx, typ, m)
}

// Typing checks SEND_MESSAGES and fans out TYPING_START in one step.
func (ms *Messages) Typing(ctx context.Context, userID, channelID snowflake.ID) error {
	s := ms.s
	guildID, err := s.ChannelGuild(ctx, channelID)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	if guildID == 0 {
		if _, err := s.private.authorize(ctx, userID, channelID); err != nil {
			return err
		}
		return s.private.publish(ctx, channelID, "TYPING_START",
			wire.TypingStart{ChannelID: channelID, UserID: userID, Timestamp: now.Unix()}, IntentDirectMessageTyping)
	}
	enq := time.Now()
	return s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.channelFor(userID, channelID, permissions.SendMessages); err != nil {
			return err
		}
		m := a.wireMember(ctx, *a.members[userID])
		a.fanoutTyping(ctx, userID, channelID, now, m, enq)
		return nil
	})
}
