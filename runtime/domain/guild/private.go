package guild

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// privatePermissions are what a recipient may do in a DM or group DM.
const privatePermissions = permissions.ViewChannel | permissions.SendMessages | permissions.ReadMessageHistory |
	permissions.AddReactions | permissions.EmbedLinks | permissions.AttachFiles

// maxGroupDM is Discord's recipient limit for group DMs.
const maxGroupDM = 10

// privateRouter orders every private-channel operation through one
// goroutine and routes events per recipient user to that user's sessions.
type privateRouter struct {
	svc     *Service
	mailbox chan func()
	// channels caches private channels; touched only by run's goroutine.
	channels map[snowflake.ID]store.Channel
	// writes keeps each channel's writes one at a time, outside the
	// router's goroutine (privatedoubt.go); ledgerRead holds the
	// channels whose ledger of writes in doubt this process read.
	writes     channelLocks
	ledgerRead sync.Map
}

func newPrivateRouter(s *Service) *privateRouter {
	return &privateRouter{svc: s, mailbox: make(chan func(), s.cfg.MailboxSize), channels: make(map[snowflake.ID]store.Channel)}
}

func (p *privateRouter) run() {
	for {
		select {
		case fn := <-p.mailbox:
			p.svc.metrics.mailboxLength.Dec()
			fn()
		case <-p.svc.done:
			return
		}
	}
}

func (p *privateRouter) post(ctx context.Context, fn func()) error {
	select {
	case p.mailbox <- fn:
		p.svc.metrics.mailboxLength.Inc()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("private mailbox: %w: %w", ErrUnavailable, ctx.Err())
	case <-p.svc.done:
		return fmt.Errorf("private mailbox: %w: closed", ErrUnavailable)
	}
}

func (p *privateRouter) do(ctx context.Context, fn func() error) error {
	res := make(chan error, 1)
	if err := p.post(ctx, func() { res <- fn() }); err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("private mailbox: %w: %w", ErrUnavailable, ctx.Err())
	case <-p.svc.done:
		return fmt.Errorf("private mailbox: %w: closed", ErrUnavailable)
	}
}

// channel returns a cached private channel (router goroutine only).
func (p *privateRouter) channel(ctx context.Context, id snowflake.ID) (store.Channel, error) {
	if c, ok := p.channels[id]; ok {
		return c, nil
	}
	c, err := p.svc.deps.Store.GetChannel(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.GuildID != 0) {
		return store.Channel{}, fmt.Errorf("private channel %d: %w", id, ErrUnknownChannel)
	}
	if err != nil {
		return store.Channel{}, storeErr("private channel", err)
	}
	p.channels[id] = c
	return c, nil
}

func (p *privateRouter) recipientChannel(ctx context.Context, userID, channelID snowflake.ID) (store.Channel, error) {
	c, err := p.channel(ctx, channelID)
	if err != nil {
		return store.Channel{}, err
	}
	if err := privateAccess(c, userID); err != nil {
		return store.Channel{}, err
	}
	return c, nil
}

func (p *privateRouter) authorize(ctx context.Context, userID, channelID snowflake.ID) (store.Channel, error) {
	var out store.Channel
	err := p.do(ctx, func() error {
		c, err := p.recipientChannel(ctx, userID, channelID)
		out = cloneChannel(c)
		return err
	})
	return out, err
}

func (p *privateRouter) authorizeSend(ctx context.Context, req SendRequest) (SendGrant, error) {
	var out SendGrant
	err := p.do(ctx, func() error {
		c, err := p.recipientChannel(ctx, req.UserID, req.ChannelID)
		if err != nil {
			return err
		}
		if !req.Edit {
			if err := p.svc.maySendPrivate(ctx, c, req.UserID); err != nil {
				return err
			}
		}
		out = SendGrant{Channel: cloneChannel(c), Users: []snowflake.ID{}, Roles: []snowflake.ID{}}
		for _, u := range req.Users {
			if slices.Contains(c.Recipients, u) && !slices.Contains(out.Users, u) {
				out.Users = append(out.Users, u)
			}
		}
		return nil
	})
	return out, err
}

// deliver sends a private-channel event to every recipient's sessions:
// bots need intent and shard 0. payloadFor may give each recipient its own
// payload (channel objects list the other recipients).
func (p *privateRouter) deliver(ctx context.Context, c store.Channel, typ string, intent uint64, payloadFor func(viewer snowflake.ID) any) {
	all := p.svc.usersSessions(ctx, c.Recipients)
	for _, uid := range c.Recipients {
		sessions := all[uid]
		if len(sessions) == 0 {
			continue
		}
		b := newBatcher(typ, mustJSON(payloadFor(uid)))
		for _, s := range sessions {
			if wants(s, intent) && (s.ShardCount <= 1 || s.ShardID == 0) {
				b.add(s, 0)
			}
		}
		b.flush(ctx, p.svc)
	}
}

func (p *privateRouter) publishMessage(ctx context.Context, typ string, m wire.Message) error {
	// The work outlives the caller's context: it only bounds the enqueue.
	actx := context.WithoutCancel(ctx)
	return p.post(ctx, func() {
		ctx := actx
		c, err := p.channel(ctx, m.ChannelID)
		if err != nil {
			return
		}
		if typ == "MESSAGE_CREATE" && m.ID > c.LastMessageID {
			c.LastMessageID = m.ID
			p.channels[c.ID] = c
		}
		p.deliver(ctx, c, typ, IntentDirectMessages, func(snowflake.ID) any { return m })
	})
}

func (p *privateRouter) publish(ctx context.Context, channelID snowflake.ID, typ string, payload any, intent uint64) error {
	// The work outlives the caller's context: it only bounds the enqueue.
	actx := context.WithoutCancel(ctx)
	return p.post(ctx, func() {
		ctx := actx
		c, err := p.channel(ctx, channelID)
		if err != nil {
			return
		}
		p.deliver(ctx, c, typ, intent, func(snowflake.ID) any { return payload })
	})
}

// wireChannel converts a private channel for a viewer: recipients are the
// other users.
func (p *privateRouter) wireChannel(ctx context.Context, c store.Channel, viewer snowflake.ID) wire.Channel {
	return p.svc.reader.wireChannel(ctx, c, viewer)
}

// Private is the private-channels seam of a Service (Service.Private):
// opening DMs and group DMs, and converting a channel to its wire object
// for a viewer (a private channel lists its other recipients). It holds
// the host, whose private-channel router orders every private-channel
// operation and sends their events to the recipients' sessions.
type Private struct {
	s *Service
}

// WireChannel converts a channel for viewer: private channels list the
// other recipients as user objects.
func (pv *Private) WireChannel(ctx context.Context, c store.Channel, viewer snowflake.ID) wire.Channel {
	s := pv.s
	if c.GuildID != 0 {
		return wire.ChannelFrom(c, nil)
	}
	return s.private.wireChannel(ctx, c, viewer)
}

// CreateDM returns the DM between userID and recipientID, creating it (and
// sending CHANNEL_CREATE to both users' sessions) when there is none.
func (pv *Private) CreateDM(ctx context.Context, userID, recipientID snowflake.ID) (store.Channel, error) {
	s := pv.s
	if _, err := s.User(ctx, recipientID); err != nil {
		return store.Channel{}, err
	}
	if err := s.mayDM(ctx, userID, recipientID); err != nil {
		return store.Channel{}, err
	}
	var out store.Channel
	err := s.private.do(ctx, func() error {
		chans, err := s.deps.Store.PrivateChannels(ctx, userID)
		if err != nil {
			return storeErr("create dm", err)
		}
		for _, c := range chans {
			if c.Type == store.ChannelDM && dmPair(c.Recipients, userID, recipientID) {
				out = c
				return nil
			}
		}
		recipients := []snowflake.ID{userID}
		if recipientID != userID {
			recipients = append(recipients, recipientID)
		}
		out, err = s.private.create(ctx, store.Channel{Type: store.ChannelDM, Recipients: recipients})
		return err
	})
	return out, err
}

func dmPair(rs []snowflake.ID, a, b snowflake.ID) bool {
	if a == b {
		return len(rs) == 1 && rs[0] == a
	}
	return len(rs) == 2 && slices.Contains(rs, a) && slices.Contains(rs, b)
}

// CreateGroupDM creates a group DM owned by userID with recipients (at
// most 10 users in all).
func (pv *Private) CreateGroupDM(ctx context.Context, userID snowflake.ID, recipients []snowflake.ID) (store.Channel, error) {
	s := pv.s
	all := []snowflake.ID{userID}
	for _, r := range recipients {
		if !slices.Contains(all, r) {
			all = append(all, r)
		}
	}
	if len(all) > maxGroupDM {
		return store.Channel{}, fmt.Errorf("group dm of %d users: %w", len(all), ErrInvalid)
	}
	for _, r := range all {
		if _, err := s.User(ctx, r); err != nil {
			return store.Channel{}, err
		}
		if err := s.mayDM(ctx, userID, r); err != nil {
			return store.Channel{}, err
		}
	}
	var out store.Channel
	err := s.private.do(ctx, func() error {
		var err error
		out, err = s.private.create(ctx, store.Channel{Type: store.ChannelGroupDM, Recipients: all, OwnerID: userID})
		return err
	})
	return out, err
}

// create stores a new private channel and announces it (router goroutine).
func (p *privateRouter) create(ctx context.Context, c store.Channel) (store.Channel, error) {
	id, err := p.svc.deps.IDs.Next()
	if err != nil {
		return store.Channel{}, fmt.Errorf("create private channel: %w: %w", ErrUnavailable, err)
	}
	c.ID = id
	c.Overwrites = []store.Overwrite{}
	if err := p.svc.deps.Store.PutChannel(ctx, c); err != nil {
		return store.Channel{}, storeErr("create private channel", err)
	}
	p.channels[id] = c
	p.svc.channelGuild.Store(id, snowflake.ID(0))
	p.deliver(ctx, c, "CHANNEL_CREATE", IntentDirectMessages, func(viewer snowflake.ID) any {
		return p.wireChannel(ctx, c, viewer)
	})
	return cloneChannel(c), nil
}
