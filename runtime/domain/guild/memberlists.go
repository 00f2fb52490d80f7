package guild

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/presence"
)

// listsOnVisibility keeps the member lists in step after a change that
// may have moved permissions (syncVisibility's arguments). Deleted
// channels lose their lists and new channels get theirs without touching
// anyone's rows. Re-checking every row and subscription (Refresh, which
// also sends INVALIDATE to sessions that lost their channel and an UPDATE
// per displayed row) runs only when visibility may really have moved: a
// channel whose VIEW_CHANNEL overwrites changed, a guild-wide change
// (role permissions, a deleted role, a new owner), or a member whose
// roles changed while one of their sessions holds list ranges.
func (a *Actor) listsOnVisibility(ctx context.Context, updated map[snowflake.ID]bool, deleted map[snowflake.ID]store.Channel, onlyUser snowflake.ID) {
	ap := a.pres
	if ap == nil {
		return
	}
	enq := time.Now()
	var d memberlist.Dispatch
	var moved []snowflake.ID
	for id := range updated {
		if c, ok := a.channels[id]; ok && listed(c) {
			if l := ap.lists.List(id); l != nil && l.ID() != channelList(c) {
				moved = append(moved, id)
			}
		}
	}
	slices.Sort(moved)
	if len(moved) > 0 {
		// Before the channel leaves its list: sessions whose user can no
		// longer view it get INVALIDATE and lose the subscription.
		d.Merge(ap.lists.Refresh())
	}
	for id := range deleted {
		ap.lists.RemoveChannel(id)
	}
	for id := range updated {
		if c, ok := a.channels[id]; ok && listed(c) {
			ap.lists.SetChannel(id, channelList(c))
		}
	}
	for _, ch := range moved {
		// Sessions that still view a moved channel hold ranges of a list
		// it left: they get a SYNC of its new list.
		for sid, chans := range ap.subscribed {
			sub, ok := a.subs[sid]
			rs, asked := chans[ch]
			if !ok || !asked || !a.canView(sub.s.UserID, ch) {
				continue
			}
			out, _ := ap.lists.Subscribe(sub.s, map[snowflake.ID][]memberlist.Range{ch: rs})
			d.Merge(out)
		}
	}
	refresh := onlyUser == 0 && len(updated) == 0 && len(deleted) == 0
	if onlyUser != 0 {
		if m, ok := a.members[onlyUser]; ok {
			d.Merge(ap.lists.Upsert(a.listMember(ctx, *m, ap.presenceOf(onlyUser))))
		}
		for id := range ap.subscribed {
			if sub, ok := a.subs[id]; ok && sub.s.UserID == onlyUser {
				refresh = true
			}
		}
	}
	if onlyUser == 0 {
		if h := a.hoistedRoles(); !slices.Equal(h, ap.hoisted) {
			ap.hoisted = h
			d.Merge(ap.lists.SetRoles(h))
		}
	}
	if refresh {
		d.Merge(ap.lists.Refresh())
	}
	a.deliverLists(ctx, ap, d, a.pressure(enq))
}

// rolesChanged re-sorts the member lists after a role's hoist flag or
// position changed.
func (a *Actor) rolesChanged(ctx context.Context) {
	ap := a.pres
	if ap == nil {
		return
	}
	h := a.hoistedRoles()
	if slices.Equal(h, ap.hoisted) {
		return
	}
	ap.hoisted = h
	a.deliverLists(ctx, ap, ap.lists.SetRoles(h), a.pressure(time.Now()))
}

// memberJoined lists a new member (offline, shown only where lists show
// offline members) and updates the member count.
func (a *Actor) memberJoined(ctx context.Context, m store.Member) {
	ap := a.pres
	if ap == nil {
		return
	}
	ap.lists.SetMemberCount(len(a.members))
	a.deliverLists(ctx, ap, ap.lists.Upsert(a.listMember(ctx, m, ap.presenceOf(m.UserID))), a.pressure(time.Now()))
}

// memberLeft removes a member who left or was kicked from every list.
func (a *Actor) memberLeft(ctx context.Context, userID snowflake.ID) {
	ap := a.pres
	if ap == nil {
		return
	}
	delete(ap.known, userID)
	ap.lists.SetMemberCount(len(a.members))
	a.deliverLists(ctx, ap, ap.lists.Remove(userID), a.pressure(time.Now()))
}

// LazyRequest applies a session's op 14: it records the channels named as
// the ones a passive session is active in (the latest op 14 replaces them),
// the channel the client has open (the first one named, if the user can
// see it) for typing, and replaces the session's member-list ranges, sending a SYNC
// for each new range. Channels the user cannot see, unknown channels and
// ranges over the limits are skipped or clamped; that error is returned
// for logging and leaves the connection open. A session not attached to
// the guild gets ErrMissingAccess.
func (s *Service) LazyRequest(ctx context.Context, sess event.Session, req memberlist.Request) error {
	enq := time.Now()
	if !s.attached(sess.ID, req.GuildID) {
		// Checked first so a client cannot load arbitrary guilds.
		return fmt.Errorf("op 14 for guild %d: %w", req.GuildID, ErrMissingAccess)
	}
	return s.do(ctx, req.GuildID, func(a *Actor) error {
		if _, ok := a.subs[sess.ID]; !ok {
			return fmt.Errorf("op 14 for guild %d: %w", a.id, ErrMissingAccess)
		}
		if req.Channels != nil {
			// The channels a passive session is active in (passive.go).
			a.setActive(sess, req.ChannelIDs())
		}
		ap := a.presenceState(ctx)
		if ap == nil {
			return nil
		}
		if t := ap.cfg.Tracker; t != nil {
			if ids := req.ChannelIDs(); len(ids) > 0 && a.canView(sess.UserID, ids[0]) {
				t.Focus(sess, a.id, ids[0])
			}
		}
		if req.Channels == nil {
			return nil
		}
		chans := ap.subscribed[sess.ID]
		if chans == nil {
			chans = make(map[snowflake.ID][]memberlist.Range)
			ap.subscribed[sess.ID] = chans
		}
		for ch, rs := range req.Channels {
			if a.canView(sess.UserID, ch) {
				chans[ch] = rs
			}
		}
		d, err := ap.lists.Subscribe(sess, req.Channels)
		a.deliverLists(ctx, ap, d, a.pressure(enq))
		if err != nil {
			return fmt.Errorf("op 14 for guild %d: %w", a.id, err)
		}
		return nil
	})
}

// RequestMembers answers a session's op 8 with GUILD_MEMBERS_CHUNK
// dispatches: the members matching its query or user ids, with presences
// when asked for and allowed, echoing its nonce. A bot asking for every
// member without GUILD_MEMBERS gets nothing (memberlist.ErrMissingIntent);
// a session not attached to the guild gets ErrMissingAccess.
func (s *Service) RequestMembers(ctx context.Context, sess event.Session, req memberlist.MembersRequest) error {
	intents := ^uint64(0)
	if sess.Bot {
		intents = sess.Intents
	}
	req, err := req.Check(intents)
	if err != nil {
		return err
	}
	if !s.attached(sess.ID, req.GuildID) {
		return fmt.Errorf("op 8 for guild %d: %w", req.GuildID, ErrMissingAccess)
	}
	return s.do(ctx, req.GuildID, func(a *Actor) error {
		if _, ok := a.subs[sess.ID]; !ok {
			return fmt.Errorf("op 8 for guild %d: %w", a.id, ErrMissingAccess)
		}
		ap := a.presenceState(ctx)
		// One batch per chunk, in chunk order.
		for _, c := range memberlist.Chunks(req, req.Select(a.candidates(ctx, ap))) {
			b := newBatcher(memberlist.ChunkDispatchType, c)
			b.add(sess, 0)
			b.flushGuild(ctx, a)
		}
		return nil
	})
}

// candidates yields the guild's members in id order for op 8.
func (a *Actor) candidates(ctx context.Context, ap *actorPresence) iter.Seq[memberlist.Candidate] {
	return func(yield func(memberlist.Candidate) bool) {
		ids := make([]snowflake.ID, 0, len(a.members))
		for id := range a.members {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, cmpID)
		for _, id := range ids {
			m := *a.members[id]
			wm := a.wireMember(ctx, m)
			c := memberlist.Candidate{UserID: id, Member: mustJSON(wm)}
			if m.Nick != "" {
				c.Names = append(c.Names, m.Nick)
			}
			if u := wm.User; u != nil {
				c.Names = append(c.Names, u.Username)
				if u.GlobalName != nil {
					c.Names = append(c.Names, *u.GlobalName)
				}
			}
			if ap != nil {
				if p, ok := ap.known[id]; ok && p.Status != presence.Offline {
					c.Presence = p.Event(id, 0)
				}
			}
			if !yield(c) {
				return
			}
		}
	}
}
