package guild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// The message write path. Every message a caller creates, edits or
// deletes — a REST send or edit, a webhook's, a bot's answer, a thread's
// or forum post's starter, a system message, a ban's purge — goes through
// Messages.Create, Messages.Update or Messages.Delete: one step of the guild's
// actor checks the write, mints the id, writes the message with its event
// (Deps.Messages, an outbox.Writer), and fans it out, so a message is in
// the store before any session sees it, and sessions see a guild's
// messages in the order the actor wrote them. Callers parse the request
// before and render the answer; the actor renders the event through the
// caller's Render.

// writeTimeout bounds a message write once the actor took it: the write
// goes on when the caller hangs up (a caller told "failed" while the write
// went on would send again, and a retried send would write the message
// twice), but a stuck store does not hold the actor for ever.
const writeTimeout = 10 * time.Second

// MessageCheck is how the actor authorises a message write.
type MessageCheck int

const (
	// CheckSend is a member's send: VIEW_CHANNEL and SEND_MESSAGES,
	// ATTACH_FILES for files, a thread's rules (an archived thread is
	// unarchived, a locked one refused) and slowmode, whose clock starts
	// (a *SlowmodeError carries RetryAfter); mentions as Messages.AuthorizeSend
	// resolves them.
	CheckSend MessageCheck = iota
	// CheckEdit is a member's edit of their message: VIEW_CHANNEL,
	// ATTACH_FILES for new files; mentions (when Mentions is set) as for a
	// send; no slowmode. A forum post's starter message is written with it
	// too: the post was just authorised.
	CheckEdit
	// CheckWebhook is a webhook's message in WebhookChannel or a thread of
	// it (Message.ChannelID): the channel must take messages, an archived
	// thread is unarchived unless locked; @everyone and roles ping as
	// allowed_mentions lets them, users only when they see the channel.
	CheckWebhook
	// CheckApp is an application's message (an interaction's answer,
	// authored by the bot user UserID): users who see the channel,
	// mentionable roles, @everyone and the others only for a bot member
	// holding MENTION_EVERYONE; no send permission (the interaction
	// allows the answer).
	CheckApp
	// CheckNone is a write the caller authorised (a system message, a
	// flag the message's thread sets): the channel must exist; mentions
	// stay as Message has them.
	CheckNone
)

// Mentions are what a message's content mentions and allowed_mentions
// lets ping; the actor keeps those the check allows.
type Mentions struct {
	Everyone bool
	Users    []snowflake.ID
	Roles    []snowflake.ID
}

// MessageWrite is one message to store: a create (Messages.Create) or an
// overwrite of a stored message (Messages.Update).
type MessageWrite struct {
	// Check is how the write is authorised; UserID is who acts (the
	// author of a send or an edit, the bot user of an application).
	Check  MessageCheck
	UserID snowflake.ID
	// Message is the message as it is to be stored. On create a zero ID
	// is minted by the actor; GuildID is set to the channel's guild.
	Message store.Message
	// Mentions, when set, replaces Message's mentions with those the check
	// allows; nil keeps them (an edit that leaves the content alone).
	Mentions *Mentions
	// Attachments is set when the write adds files (ATTACH_FILES).
	Attachments bool
	// WebhookChannel is the webhook's channel (CheckWebhook).
	WebhookChannel snowflake.ID
	// Render turns the stored message into the MESSAGE_CREATE or
	// MESSAGE_UPDATE payload, which is also the caller's answer. It runs
	// in the guild's actor after the write, so it must not call a Service
	// method that runs in an actor (it would wait for the actor it runs
	// in): whatever needs the guild's decisions is decided before the
	// write. Reading users (Service.User: a cache and the store) is fine.
	Render func(ctx context.Context, w Written) (wire.Message, error)
}

// Written is a stored message write.
type Written struct {
	// Message is the message as stored.
	Message store.Message
	// Channel is the channel written to, as the actor holds it.
	Channel store.Channel
	// Member is the author's partial member, when the check resolved it
	// (a member's send or an edit with content, a system message).
	Member *wire.Member
	// Wire is the payload Render made (empty when Render failed).
	Wire wire.Message
}

// Messages is the messages seam of a Service (Service.Messages): every
// message write — send, edit, delete and bulk delete, pin — for every
// caller, the send check, typing, and the fan-out of events about a
// channel's content (reactions, pins). It holds the host: a guild
// channel's writes are steps of its guild actor, a private channel's of
// the private-channel router.
type Messages struct {
	s *Service
}

// Create stores a new message and fans out MESSAGE_CREATE, in one
// step of the channel's guild actor (see MessageWrite). A refused write is
// the check's error; a store failure is ErrUnavailable (nothing was
// fanned out); a Render failure is returned with the message stored and
// not fanned out.
//
// In a private channel the check and the fan-out are two steps of the
// private-channel router and the write runs between them: the router
// serves every private channel of the process, so it does not wait for
// the store.
func (ms *Messages) Create(ctx context.Context, w MessageWrite) (Written, error) {
	s := ms.s
	return s.writeMessage(ctx, w, true)
}

// Update stores an edit of a stored message (w.Message is the
// whole message as it is to be stored) and fans out MESSAGE_UPDATE, as
// Create does. A message of an archived thread is not changed
// (ErrThreadArchived).
func (ms *Messages) Update(ctx context.Context, w MessageWrite) (Written, error) {
	s := ms.s
	return s.writeMessage(ctx, w, false)
}

func (s *Service) writeMessage(ctx context.Context, w MessageWrite, create bool) (Written, error) {
	if w.Render == nil {
		return Written{}, fmt.Errorf("message write: %w: no Render", ErrInvalid)
	}
	guildID, err := s.ChannelGuild(ctx, w.Message.ChannelID)
	if err != nil {
		return Written{}, err
	}
	if guildID == 0 {
		return s.private.writeMessage(ctx, w, create)
	}
	var (
		out Written
		g   SendGrant
		m   store.Message
		typ = eventType(create)
	)
	// land renders the stored message and fans it out: once the write is
	// acknowledged (finish), or once a write in doubt was completed after
	// its caller was answered (late).
	land := func(a *Actor, wctx context.Context) (Written, error) {
		o := Written{Message: m, Channel: g.Channel, Member: g.Member}
		var err error
		if o.Wire, err = w.Render(wctx, o); err != nil {
			return o, err
		}
		// The fan-out outlives the step, as every dispatch of the actor
		// does: what it hands on is not cut when the write's bound ends.
		a.publishMessage(context.WithoutCancel(ctx), typ, o.Wire)
		return o, nil
	}
	err = s.writeBatched(ctx, guildID, &batchedWrite{
		channel: w.Message.ChannelID,
		prepare: func(a *Actor) (func(context.Context) error, error) {
			actx, span := tracing.Start(ctx, "authorize")
			var err error
			g, m, err = a.prepareWrite(actx, &w, create)
			tracing.End(span, err)
			if err != nil {
				return nil, err
			}
			return func(wctx context.Context) error { return s.putMessage(wctx, typ, m) }, nil
		},
		finish: func(a *Actor, wctx context.Context, err error) error {
			if err != nil {
				return err
			}
			out, err = land(a, wctx)
			return err
		},
		late: func(a *Actor, wctx context.Context) error {
			_, err := land(a, wctx)
			return err
		},
		describe: func(a *Actor, wctx context.Context) doubtRecord {
			wm, err := w.Render(wctx, Written{Message: m, Channel: g.Channel, Member: g.Member})
			return newDoubtRecord(typ, m, wm, err)
		},
	})
	return out, err
}

// write runs fn in the guild's actor as do does, except that once the
// actor has started fn the caller waits for its end even when ctx ends:
// fn writes durably, and a caller that gave up would report a failure
// for a write that went on. A caller whose ctx ended before its turn gets
// ErrUnavailable and nothing is written.
func (s *Service) write(ctx context.Context, guildID snowflake.ID, fn func(a *Actor) error) error {
	return s.run(ctx, guildID, fn, true)
}

// writeContext is the context of a write the actor took: detached from
// the caller, bounded by writeTimeout.
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
}

// prepareWrite is the actor's part of Messages.Create and Messages.Update
// before the durable write: the check, the mentions it allows, the id.
func (a *Actor) prepareWrite(ctx context.Context, w *MessageWrite, create bool) (SendGrant, store.Message, error) {
	g, err := a.checkWrite(ctx, w, create)
	if err != nil {
		return SendGrant{}, store.Message{}, err
	}
	m := w.Message
	m.GuildID = a.id
	if w.Mentions != nil {
		m.Mentions, m.MentionRoles, m.MentionEveryone = g.Users, g.Roles, g.MentionEveryone
	}
	if create && m.ID == 0 {
		if m.ID, err = a.mintAfter(a.channels[m.ChannelID]); err != nil {
			return SendGrant{}, store.Message{}, err
		}
	}
	return g, m, nil
}

// maxIDWait is how long mintAfter waits for this node's clock to pass a
// channel's last message (a message id minted elsewhere a little ahead:
// a thread's starter minted on an api node, say) before it refuses.
const maxIDWait = 2 * time.Second

// mintAfter mints a message id for channel c that is after c's last
// message. Ids are minted from this node's clock, but a channel's last
// message may come from another node's: an earlier owner of the guild
// whose clock ran ahead, or this node before its clock stepped back
// further than the generator's own guard sees. An id behind it would
// put the new message before messages readers have already seen, so the
// actor waits (up to maxIDWait) for its clock to pass it, and refuses
// with ErrUnavailable beyond that: the sender retries, and the channel's
// order holds.
func (a *Actor) mintAfter(c *store.Channel) (snowflake.ID, error) {
	var waited time.Duration
	for {
		id, err := a.svc.deps.IDs.Next()
		if err != nil {
			return 0, fmt.Errorf("message id: %w: %w", ErrUnavailable, err)
		}
		if c == nil || id > c.LastMessageID {
			return id, nil
		}
		behind := c.LastMessageID.Time().Sub(id.Time()) + time.Millisecond
		if waited+behind > maxIDWait {
			a.svc.metrics.idsBehindChannel.Inc()
			return 0, fmt.Errorf("message id %d is %v behind channel %d's last message %d (this node's clock is behind the one that minted it): %w",
				id, behind, c.ID, c.LastMessageID, ErrUnavailable)
		}
		time.Sleep(behind) // the clock passing an instant has no event to await
		waited += behind
	}
}

// eventType is the event (and dispatch) of a create or an update.
func eventType(create bool) string {
	if create {
		return eventlog.MessageCreate
	}
	return eventlog.MessageUpdate
}

// putMessage writes m with its typ event. A failed attempt is tried once
// more: the write is idempotent for one id, so a half-done first attempt
// is completed, not doubled (its event may then be committed twice, which
// consumers dedupe by id).
func (s *Service) putMessage(ctx context.Context, typ string, m store.Message) error {
	err := s.messages.PutMessage(ctx, typ, m)
	if err != nil && ctx.Err() == nil {
		err = s.messages.PutMessage(ctx, typ, m)
	}
	if err != nil {
		return fmt.Errorf("store message %d: %w: %w", m.ID, ErrUnavailable, err)
	}
	return nil
}

// checkWrite authorises w in the actor (see MessageCheck) and resolves
// its mentions and the author's member.
func (a *Actor) checkWrite(ctx context.Context, w *MessageWrite, create bool) (SendGrant, error) {
	channelID := w.Message.ChannelID
	if !create {
		if c := a.channels[channelID]; c != nil && c.Thread != nil && c.Thread.Archived {
			return SendGrant{}, fmt.Errorf("message in thread %d: %w", channelID, ErrThreadArchived)
		}
	}
	var mn Mentions
	if w.Mentions != nil {
		mn = *w.Mentions
	}
	switch w.Check {
	case CheckSend:
		return a.authorizeSend(ctx, SendRequest{UserID: w.UserID, ChannelID: channelID, MentionsEveryone: mn.Everyone,
			Users: mn.Users, Roles: mn.Roles, Attachments: w.Attachments})
	case CheckEdit:
		if w.Mentions != nil {
			return a.authorizeSend(ctx, SendRequest{UserID: w.UserID, ChannelID: channelID, MentionsEveryone: mn.Everyone,
				Users: mn.Users, Roles: mn.Roles, Attachments: w.Attachments, Edit: true})
		}
		var perms permissions.Bits
		if w.Attachments {
			perms = permissions.AttachFiles
		}
		v, err := a.channelFor(w.UserID, channelID, perms)
		if err != nil {
			return SendGrant{}, err
		}
		return SendGrant{GuildID: a.id, Channel: v.Channel}, nil
	case CheckWebhook:
		req := WebhookSend{GuildID: a.id, ChannelID: w.WebhookChannel, MentionsEveryone: mn.Everyone, Users: mn.Users, Roles: mn.Roles}
		if channelID != w.WebhookChannel {
			req.ThreadID = channelID
		}
		return a.authorizeWebhookSend(ctx, req)
	case CheckApp:
		got, err := a.appMentions(w.UserID, channelID, mn.Everyone, mn.Users, mn.Roles)
		if err != nil {
			return SendGrant{}, err
		}
		return SendGrant{GuildID: a.id, Channel: cloneChannel(*a.channels[channelID]), MentionEveryone: got.Everyone,
			Users: got.Users, Roles: got.Roles}, nil
	case CheckNone:
		c := a.channels[channelID]
		if c == nil {
			return SendGrant{}, fmt.Errorf("channel %d: %w", channelID, ErrUnknownChannel)
		}
		g := SendGrant{GuildID: a.id, Channel: cloneChannel(*c)}
		if mem, ok := a.members[w.Message.AuthorID]; ok {
			wm := wire.MemberFrom(*mem, nil, a.svc.cfg.Now()) // a message's member is partial
			g.Member = &wm
		}
		return g, nil
	}
	return SendGrant{}, fmt.Errorf("message check %d: %w", w.Check, ErrInvalid)
}

// MessageDelete is a deletion of stored messages of one channel.
type MessageDelete struct {
	ChannelID snowflake.ID
	// Messages are the messages to delete, just read from the store.
	Messages []store.Message
	// UserID, when set, is the member who deletes: they must see the
	// channel, and ManageMessages asks for MANAGE_MESSAGES there (a
	// message not their own, a bulk delete). Zero: the caller authorised
	// the deletion (a webhook's or an application's own message).
	UserID         snowflake.ID
	ManageMessages bool
	// Purge deletes in an archived thread too (a ban's purge); otherwise
	// the messages of an archived thread are not deleted
	// (ErrThreadArchived).
	Purge bool
}

// Delete deletes d.Messages with their MESSAGE_DELETE events and
// fans out MESSAGE_DELETE (one message) or MESSAGE_DELETE_BULK (several,
// at most 100 ids an event), in one step of the guild's actor; private
// channels as for Messages.Create. A message a concurrent delete removed
// first may be store.ErrNotFound (see outbox.Writer.DeleteMessage); a
// store failure is ErrUnavailable.
func (ms *Messages) Delete(ctx context.Context, d MessageDelete) error {
	s := ms.s
	if len(d.Messages) == 0 {
		return nil
	}
	guildID, err := s.ChannelGuild(ctx, d.ChannelID)
	if err != nil {
		return err
	}
	if guildID == 0 {
		return s.private.deleteMessages(ctx, d)
	}
	return s.write(ctx, guildID, func(a *Actor) error {
		if d.UserID != 0 {
			var perms permissions.Bits
			if d.ManageMessages {
				perms = permissions.ManageMessages
			}
			if _, err := a.channelFor(d.UserID, d.ChannelID, perms); err != nil {
				return err
			}
		}
		c := a.channels[d.ChannelID]
		if c == nil {
			return fmt.Errorf("channel %d: %w", d.ChannelID, ErrUnknownChannel)
		}
		if !d.Purge && c.Thread != nil && c.Thread.Archived {
			return fmt.Errorf("messages of thread %d: %w", d.ChannelID, ErrThreadArchived)
		}
		// A write of the channel in doubt is settled first: completed
		// after the deletion, it would bring back what was deleted.
		if err := a.settle(d.ChannelID); err != nil {
			return err
		}
		wctx, cancel := writeContext(ctx)
		defer cancel()
		ids, err := a.svc.deleteMessages(wctx, a.id, d)
		if err != nil {
			return err
		}
		for len(ids) > 0 {
			n := min(len(ids), 100)
			typ, payload := deletePayload(a.id, d.ChannelID, ids[:n])
			a.broadcastChannel(context.WithoutCancel(ctx), typ, d.ChannelID, payload, IntentGuildMessages)
			ids = ids[n:]
		}
		return nil
	})
}

// deleteMessages writes d's deletion with its events and returns the
// deleted ids.
func (s *Service) deleteMessages(ctx context.Context, guildID snowflake.ID, d MessageDelete) ([]snowflake.ID, error) {
	var err error
	if len(d.Messages) == 1 {
		err = s.messages.DeleteMessage(ctx, guildID, d.Messages[0])
	} else {
		err = s.messages.DeleteMessages(ctx, guildID, d.ChannelID, d.Messages)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("delete message: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("delete messages of %d: %w: %w", d.ChannelID, ErrUnavailable, err)
	}
	ids := make([]snowflake.ID, len(d.Messages))
	for i, m := range d.Messages {
		ids[i] = m.ID
	}
	return ids, nil
}

// deletePayload is MESSAGE_DELETE for one id, MESSAGE_DELETE_BULK for
// several.
func deletePayload(guildID, channelID snowflake.ID, ids []snowflake.ID) (string, any) {
	if len(ids) == 1 {
		return "MESSAGE_DELETE", wire.MessageDelete{ID: ids[0], ChannelID: channelID, GuildID: guildID}
	}
	return "MESSAGE_DELETE_BULK", wire.MessageDeleteBulk{IDs: ids, ChannelID: channelID, GuildID: guildID}
}

// writeMessage is Messages.Create and Messages.Update in a private channel:
// the check in the router, the write, then the fan-out in the router.
func (p *privateRouter) writeMessage(ctx context.Context, w MessageWrite, create bool) (Written, error) {
	var g SendGrant
	err := p.do(ctx, func() error {
		var err error
		g, err = p.checkWrite(ctx, &w, create)
		return err
	})
	if err != nil {
		return Written{}, err
	}
	// One write of the channel at a time, its id minted in its turn,
	// after the channel's write in doubt is completed (privatedoubt.go).
	unlock, err := p.writes.lock(ctx, w.Message.ChannelID)
	if err != nil {
		return Written{}, err
	}
	defer unlock()
	if err := p.settle(ctx, w.Message.ChannelID); err != nil {
		return Written{}, err
	}
	m := w.Message
	m.GuildID = 0
	if w.Check == CheckSend {
		m.TTS = false // a member's TTS is a guild channel's
	}
	if w.Mentions != nil {
		m.Mentions, m.MentionRoles, m.MentionEveryone = g.Users, []snowflake.ID{}, false
	}
	if create && m.ID == 0 {
		if m.ID, err = p.svc.deps.IDs.Next(); err != nil {
			return Written{}, fmt.Errorf("message id: %w: %w", ErrUnavailable, err)
		}
	}
	wctx, cancel := writeContext(ctx)
	defer cancel()
	typ := eventType(create)
	if err := p.svc.putMessage(wctx, typ, m); err != nil {
		if inDoubt(err) {
			p.hold(ctx, typ, m, g.Channel, w.Render)
		}
		return Written{}, err
	}
	out := Written{Message: m, Channel: g.Channel}
	if out.Wire, err = w.Render(wctx, out); err != nil {
		return out, err
	}
	if err := p.publishMessage(wctx, typ, out.Wire); err != nil {
		p.svc.log.Warn("private message not published", "message_id", m.ID, "err", err)
	}
	return out, nil
}

// checkWrite authorises a private-channel write (router goroutine).
func (p *privateRouter) checkWrite(ctx context.Context, w *MessageWrite, create bool) (SendGrant, error) {
	channelID := w.Message.ChannelID
	var c store.Channel
	var err error
	switch w.Check {
	case CheckSend, CheckEdit:
		c, err = p.recipientChannel(ctx, w.UserID, channelID)
		if err != nil {
			return SendGrant{}, err
		}
		if w.Check == CheckSend && create {
			if err := p.svc.maySendPrivate(ctx, c, w.UserID); err != nil {
				return SendGrant{}, err
			}
		}
	case CheckApp, CheckNone:
		if c, err = p.channel(ctx, channelID); err != nil {
			return SendGrant{}, err
		}
	default:
		return SendGrant{}, fmt.Errorf("private channel %d: %w", channelID, ErrUnknownChannel)
	}
	g := SendGrant{Channel: cloneChannel(c), Users: []snowflake.ID{}, Roles: []snowflake.ID{}}
	if w.Mentions != nil {
		for _, u := range w.Mentions.Users {
			if slices.Contains(c.Recipients, u) && !slices.Contains(g.Users, u) {
				g.Users = append(g.Users, u)
			}
		}
	}
	return g, nil
}

// deleteMessages is Messages.Delete in a private channel.
func (p *privateRouter) deleteMessages(ctx context.Context, d MessageDelete) error {
	if d.UserID != 0 {
		if _, err := p.authorize(ctx, d.UserID, d.ChannelID); err != nil {
			return err
		}
		if d.ManageMessages && !privatePermissions.Has(permissions.ManageMessages) {
			return fmt.Errorf("private channel %d: %w", d.ChannelID, ErrMissingPermissions)
		}
	}
	// A write of the channel in doubt is completed first: completed
	// after the deletion, it would bring back what was deleted.
	unlock, err := p.writes.lock(ctx, d.ChannelID)
	if err != nil {
		return err
	}
	defer unlock()
	if err := p.settle(ctx, d.ChannelID); err != nil {
		return err
	}
	wctx, cancel := writeContext(ctx)
	defer cancel()
	ids, err := p.svc.deleteMessages(wctx, 0, d)
	if err != nil {
		return err
	}
	for len(ids) > 0 {
		n := min(len(ids), 100)
		typ, payload := deletePayload(0, d.ChannelID, ids[:n])
		if err := p.publish(wctx, d.ChannelID, typ, payload, IntentDirectMessages); err != nil {
			p.svc.log.Warn("private message delete not published", "channel_id", d.ChannelID, "err", err)
		}
		ids = ids[n:]
	}
	return nil
}
