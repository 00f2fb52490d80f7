package guild

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Threads are channels of the guild actor like any other (a.channels),
// with Channel.Thread set and ParentID naming the channel they live in.
// They have no overwrites of their own: what a user may do in a thread is
// decided by the one decision (decide → threadPerms) from the parent's
// permissions, with the thread rules applied there and nowhere else:
//
//   - a private thread is visible only to its members and to holders of
//     MANAGE_THREADS in the parent;
//   - SEND_MESSAGES in a thread is SEND_MESSAGES_IN_THREADS of the parent.
//
// Locked and archived states are checked where they matter (send, join,
// edit). Thread events reuse the channel visibility sync: a thread that
// appears for, changes for or disappears from a session is THREAD_CREATE,
// THREAD_UPDATE or THREAD_DELETE (syncVisibility with threadEvent).

// Auto-archive durations Discord accepts, in minutes.
var autoArchiveDurations = []int{60, 1440, 4320, 10080}

// defaultAutoArchive is Discord's default auto_archive_duration (a day).
const defaultAutoArchive = 1440

// archiveSweep is how often idle threads of loaded guilds are archived.
const archiveSweep = 30 * time.Second

// threadPerms is the decision for a thread channel: the parent's
// permissions with the thread rules applied (see the package comment
// above).
func (a *Actor) threadPerms(d permissions.Decision, userID snowflake.ID, c *store.Channel) permissions.Bits {
	p := a.decide(d, userID, c.ParentID)
	if !permissions.AccessOf(p).CanView() {
		return p
	}
	if c.Type == store.ChannelPrivateThread && !p.Has(permissions.ManageThreads) && !a.isThreadMember(c.ID, userID) {
		return 0
	}
	p &^= permissions.SendMessages
	if p.Has(permissions.SendMessagesInThreads) {
		p |= permissions.SendMessages
	}
	return p
}

func (a *Actor) isThreadMember(threadID, userID snowflake.ID) bool {
	_, ok := a.threadMembers[threadID][userID]
	return ok
}

// loadThreads reads the members of the guild's threads and archives the
// threads that went idle while the guild was not loaded.
func (a *Actor) loadThreads(ctx context.Context) error {
	a.threadMembers = make(map[snowflake.ID]map[snowflake.ID]store.ThreadMember)
	for id, c := range a.channels {
		if c.Thread == nil {
			continue
		}
		ms, err := a.svc.deps.Store.ThreadMembers(ctx, id)
		if err != nil {
			return fmt.Errorf("load thread %d members: %w: %w", id, ErrUnavailable, err)
		}
		set := make(map[snowflake.ID]store.ThreadMember, len(ms))
		for _, m := range ms {
			set[m.UserID] = m
		}
		a.threadMembers[id] = set
	}
	a.archiveIdle(ctx, a.svc.cfg.Now())
	return nil
}

// startArchiver starts, once per Service, the sweep that archives idle
// threads of the loaded guilds.
func (s *Service) startArchiver() {
	s.threadSweep.Do(func() {
		go func() {
			t := time.NewTicker(archiveSweep)
			defer t.Stop()
			for {
				select {
				case <-s.done:
					return
				case <-t.C:
					for _, g := range s.LoadedGuilds() {
						ctx, cancel := context.WithTimeout(context.Background(), archiveSweep)
						_ = s.post(ctx, g, func(a *Actor) { a.archiveIdle(ctx, s.cfg.Now()) })
						cancel()
					}
				}
			}
		}()
	})
}

// lastActivity is when a thread last saw a message or changed archive
// state.
func lastActivity(c *store.Channel) time.Time {
	t := c.Thread.ArchiveTimestamp
	if c.LastMessageID != 0 && c.LastMessageID.Time().After(t) {
		t = c.LastMessageID.Time()
	}
	return t
}

// archiveIdle archives the active threads without activity for their
// auto_archive_duration.
func (a *Actor) archiveIdle(ctx context.Context, now time.Time) {
	for id, c := range a.channels {
		if c.Thread == nil || c.Thread.Archived {
			continue
		}
		if now.Sub(lastActivity(c)) >= time.Duration(c.Thread.AutoArchiveDuration)*time.Minute {
			if err := a.setArchived(ctx, id, true); err != nil {
				a.svc.log.Warn("thread not archived", "thread_id", id, "err", err)
			}
		}
	}
}

// setArchived archives or unarchives a thread and tells who sees it.
func (a *Actor) setArchived(ctx context.Context, threadID snowflake.ID, archived bool) error {
	c := cloneThread(*a.channels[threadID])
	c.Thread.Archived = archived
	c.Thread.ArchiveTimestamp = a.svc.cfg.Now()
	if err := a.putChannel(ctx, c); err != nil {
		return err
	}
	a.syncVisibility(ctx, map[snowflake.ID]bool{threadID: true}, nil, 0)
	return nil
}

// cloneThread copies a thread channel deeply enough to change its
// metadata.
func cloneThread(c store.Channel) store.Channel {
	c = cloneChannel(c)
	if c.Thread != nil {
		t := *c.Thread
		t.AppliedTags = slices.Clone(t.AppliedTags)
		c.Thread = &t
	}
	return c
}

// ThreadSpec describes a new thread.
type ThreadSpec struct {
	ParentID snowflake.ID
	// MessageID starts the thread from that message of the parent (the
	// thread takes its id); 0 creates a standalone thread.
	MessageID           snowflake.ID
	Name                string
	Type                int
	AutoArchiveDuration int
	// Invitable applies to private threads; nil is Discord's default, true.
	Invitable        *bool
	RateLimitPerUser int
	// Forum marks a forum post: MessageID is the id minted for its
	// starter message (and the thread), which the caller stores in the
	// thread once it exists; AppliedTags are its tags.
	Forum       bool
	AppliedTags []snowflake.ID
}

func validAutoArchive(d int) error {
	if !slices.Contains(autoArchiveDurations, d) {
		return fmt.Errorf("auto_archive_duration %d: %w", d, ErrInvalid)
	}
	return nil
}

// Threads is the threads seam of a Service (Service.Threads): creating,
// changing and deleting threads, their members, and the thread lists. It
// holds the host, whose guild actors keep the threads; the idle-thread
// archiver stays on the host, which starts it once for every guild.
type Threads struct {
	s *Service
}

// Create creates a thread in a text or announcement channel:
// CREATE_PUBLIC_THREADS (from a message, or a public thread) or
// CREATE_PRIVATE_THREADS in the parent, decided there; the creator joins
// it. Who sees it gets THREAD_CREATE.
func (th *Threads) Create(ctx context.Context, userID snowflake.ID, spec ThreadSpec) (store.Channel, store.ThreadMember, error) {
	s := th.s
	if n := utf8.RuneCountInString(spec.Name); n < 1 || n > 100 {
		return store.Channel{}, store.ThreadMember{}, fmt.Errorf("thread name length %d: %w", n, ErrInvalid)
	}
	if spec.AutoArchiveDuration == 0 {
		spec.AutoArchiveDuration = defaultAutoArchive
	}
	if err := validAutoArchive(spec.AutoArchiveDuration); err != nil {
		return store.Channel{}, store.ThreadMember{}, err
	}
	if spec.RateLimitPerUser < 0 || spec.RateLimitPerUser > maxSlowmode {
		return store.Channel{}, store.ThreadMember{}, fmt.Errorf("rate_limit_per_user %d: %w", spec.RateLimitPerUser, ErrInvalid)
	}
	guildID, err := s.guildOf(ctx, spec.ParentID)
	if err != nil {
		return store.Channel{}, store.ThreadMember{}, err
	}
	id := spec.MessageID
	if id == 0 {
		if id, err = s.deps.IDs.Next(); err != nil {
			return store.Channel{}, store.ThreadMember{}, fmt.Errorf("create thread: %w: %w", ErrUnavailable, err)
		}
	}
	var out store.Channel
	var member store.ThreadMember
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, spec.ParentID, 0)
		if err != nil {
			return err
		}
		parent := v.Channel
		if (parent.Type == store.ChannelForum) != spec.Forum {
			return fmt.Errorf("forum post in channel type %d: %w", parent.Type, ErrWrongChannelType)
		}
		if parent.Type != store.ChannelText && parent.Type != channelAnnouncement && parent.Type != store.ChannelForum {
			return fmt.Errorf("threads in channel type %d: %w", parent.Type, ErrWrongChannelType)
		}
		var applied []snowflake.ID
		if spec.Forum {
			if !v.Permissions.Has(forumPostNeeded) {
				return fmt.Errorf("post in forum %d: %w", parent.ID, ErrMissingPermissions)
			}
			if err := checkAppliedTags(parent, spec.AppliedTags, v.Permissions); err != nil {
				return err
			}
			applied = append([]snowflake.ID{}, spec.AppliedTags...)
		}
		typ := spec.Type
		switch {
		case spec.Forum:
			typ = store.ChannelPublicThread
		case spec.MessageID != 0 && parent.Type == channelAnnouncement:
			typ = store.ChannelAnnouncementThread
		case spec.MessageID != 0:
			typ = store.ChannelPublicThread
		case typ == 0:
			typ = store.ChannelPrivateThread
		}
		need := permissions.CreatePublicThreads
		switch typ {
		case store.ChannelPrivateThread:
			if parent.Type == channelAnnouncement {
				return fmt.Errorf("private thread in an announcement channel: %w", ErrWrongChannelType)
			}
			need = permissions.CreatePrivateThreads
		case store.ChannelPublicThread, store.ChannelAnnouncementThread:
		default:
			return fmt.Errorf("thread type %d: %w", typ, ErrInvalid)
		}
		if !spec.Forum && !v.Permissions.Has(need) {
			return fmt.Errorf("create thread in %d: %w", parent.ID, ErrMissingPermissions)
		}
		if _, ok := a.channels[id]; ok {
			return fmt.Errorf("message %d: %w", id, ErrThreadExists)
		}
		now := a.svc.cfg.Now()
		c := store.Channel{
			ID: id, GuildID: a.id, Type: typ, Name: spec.Name, ParentID: parent.ID, OwnerID: userID,
			RateLimitPerUser: spec.RateLimitPerUser, Overwrites: []store.Overwrite{}, NSFW: parent.NSFW,
			Thread: &store.ThreadMeta{AutoArchiveDuration: spec.AutoArchiveDuration, ArchiveTimestamp: now, CreatedAt: now, AppliedTags: applied},
		}
		if typ == store.ChannelPrivateThread {
			c.Thread.Invitable = spec.Invitable == nil || *spec.Invitable
		}
		if spec.Forum {
			// A post opens with its starter message, which has the
			// post's id: THREAD_CREATE and the answer already name it.
			c.LastMessageID = id
		}
		member = store.ThreadMember{ThreadID: id, UserID: userID, JoinedAt: now}
		if _, err := a.svc.deps.Store.PutThreadMember(ctx, member); err != nil {
			return storeErr("put thread member", err)
		}
		c.Thread.MemberCount = 1
		a.threadMembers[id] = map[snowflake.ID]store.ThreadMember{userID: member}
		if err := a.putChannel(ctx, c); err != nil {
			delete(a.threadMembers, id)
			return err
		}
		out = cloneThread(c)
		a.newThread = id
		a.syncVisibility(ctx, map[snowflake.ID]bool{id: true}, nil, 0)
		a.newThread = 0
		a.svc.startArchiver()
		return nil
	})
	return out, member, err
}

// ThreadPatch changes a thread; nil fields stay.
type ThreadPatch struct {
	Name                *string
	Archived            *bool
	Locked              *bool
	AutoArchiveDuration *int
	Invitable           *bool
	RateLimitPerUser    *int
	// AppliedTags replaces a forum post's tags (its creator or
	// MANAGE_THREADS).
	AppliedTags *[]snowflake.ID
}

// Modify changes a thread. Its creator may rename it, archive it and
// change its auto-archive duration; locking, invitable, slowmode and
// unarchiving a locked thread need MANAGE_THREADS; everything else about
// it is MANAGE_THREADS too. An archived thread accepts only an unarchive
// (with other fields) — anything else is 50083.
func (th *Threads) Modify(ctx context.Context, userID, threadID snowflake.ID, p ThreadPatch) (store.Channel, error) {
	s := th.s
	guildID, err := s.guildOf(ctx, threadID)
	if err != nil {
		return store.Channel{}, err
	}
	var out store.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, threadID, 0)
		if err != nil {
			return err
		}
		if v.Channel.Thread == nil {
			return fmt.Errorf("channel %d is not a thread: %w", threadID, ErrWrongChannelType)
		}
		mod := v.Permissions.Has(permissions.ManageThreads)
		owner := v.Channel.OwnerID == userID
		c := cloneThread(v.Channel)
		t := c.Thread
		if t.Archived && (p.Archived == nil || *p.Archived) {
			return fmt.Errorf("thread %d: %w", threadID, ErrThreadArchived)
		}
		if t.Archived && t.Locked && !mod {
			return fmt.Errorf("unarchive locked thread %d: %w", threadID, ErrMissingPermissions)
		}
		needMod := p.Locked != nil || p.Invitable != nil || p.RateLimitPerUser != nil
		if (needMod || !owner) && !mod {
			return fmt.Errorf("modify thread %d: %w", threadID, ErrMissingPermissions)
		}
		if p.Name != nil {
			if n := utf8.RuneCountInString(*p.Name); n < 1 || n > 100 {
				return fmt.Errorf("thread name length %d: %w", n, ErrInvalid)
			}
			c.Name = *p.Name
		}
		if p.AutoArchiveDuration != nil {
			if err := validAutoArchive(*p.AutoArchiveDuration); err != nil {
				return err
			}
			t.AutoArchiveDuration = *p.AutoArchiveDuration
		}
		if p.RateLimitPerUser != nil {
			if *p.RateLimitPerUser < 0 || *p.RateLimitPerUser > maxSlowmode {
				return fmt.Errorf("rate_limit_per_user %d: %w", *p.RateLimitPerUser, ErrInvalid)
			}
			c.RateLimitPerUser = *p.RateLimitPerUser
		}
		if p.Locked != nil {
			t.Locked = *p.Locked
		}
		if p.AppliedTags != nil {
			forum, ok := a.channels[c.ParentID]
			if !ok || forum.Type != store.ChannelForum {
				return fmt.Errorf("applied_tags outside a forum: %w", ErrInvalid)
			}
			if err := checkAppliedTags(*forum, *p.AppliedTags, v.Permissions); err != nil {
				return err
			}
			t.AppliedTags = append([]snowflake.ID{}, *p.AppliedTags...)
		}
		if p.Invitable != nil {
			if c.Type != store.ChannelPrivateThread {
				return fmt.Errorf("invitable on a public thread: %w", ErrInvalid)
			}
			t.Invitable = *p.Invitable
		}
		if p.Archived != nil && *p.Archived != t.Archived {
			t.Archived = *p.Archived
			t.ArchiveTimestamp = a.svc.cfg.Now()
		}
		if err := a.putChannel(ctx, c); err != nil {
			return err
		}
		out = cloneThread(*a.channels[threadID])
		a.syncVisibility(ctx, map[snowflake.ID]bool{threadID: true}, nil, 0)
		return nil
	})
	return out, err
}

// Delete deletes a thread and its messages (MANAGE_THREADS).
func (th *Threads) Delete(ctx context.Context, userID, threadID snowflake.ID) (store.Channel, error) {
	s := th.s
	guildID, err := s.guildOf(ctx, threadID)
	if err != nil {
		return store.Channel{}, err
	}
	var out store.Channel
	err = s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, threadID, permissions.ManageThreads)
		if err != nil {
			return err
		}
		if v.Channel.Thread == nil {
			return fmt.Errorf("channel %d is not a thread: %w", threadID, ErrWrongChannelType)
		}
		deleted := map[snowflake.ID]store.Channel{}
		if err := a.dropThread(ctx, threadID, deleted); err != nil {
			return err
		}
		out = v.Channel
		a.syncVisibility(ctx, nil, deleted, 0)
		return nil
	})
	return out, err
}

// dropThread removes a thread from the store and the actor, recording it
// in deleted for the visibility sync.
func (a *Actor) dropThread(ctx context.Context, threadID snowflake.ID, deleted map[snowflake.ID]store.Channel) error {
	c := a.channels[threadID]
	if err := a.svc.deps.Store.DeleteChannel(ctx, threadID); err != nil {
		return storeErr("delete thread", err)
	}
	for uid := range a.threadMembers[threadID] {
		if _, err := a.svc.deps.Store.DeleteThreadMember(ctx, threadID, uid); err != nil {
			a.svc.log.Warn("thread member row left behind", "thread_id", threadID, "user_id", uid, "err", err)
		}
	}
	deleted[threadID] = cloneThread(*c)
	delete(a.channels, threadID)
	delete(a.threadMembers, threadID)
	a.engine.DeleteChannel(threadID)
	a.svc.channelGuild.Delete(threadID)
	for k := range a.slow {
		if k.channel == threadID {
			delete(a.slow, k)
		}
	}
	return nil
}

// dropThreadsOf removes every thread of a channel being deleted.
func (a *Actor) dropThreadsOf(ctx context.Context, parentID snowflake.ID, deleted map[snowflake.ID]store.Channel) error {
	for id, c := range a.channels {
		if c.Thread != nil && c.ParentID == parentID {
			if err := a.dropThread(ctx, id, deleted); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddMember adds targetID to a thread as userID (joining when they
// are the same). Joining needs the thread visible and not archived;
// adding someone else needs SEND_MESSAGES_IN_THREADS, and for a private
// thread either MANAGE_THREADS or an invitable thread one is a member of;
// the target must be a member of the guild who sees the parent channel.
func (th *Threads) AddMember(ctx context.Context, userID, threadID, targetID snowflake.ID) error {
	s := th.s
	guildID, err := s.guildOf(ctx, threadID)
	if err != nil {
		return err
	}
	return s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, threadID, 0)
		if err != nil {
			return err
		}
		c := v.Channel
		if c.Thread == nil {
			return fmt.Errorf("channel %d is not a thread: %w", threadID, ErrWrongChannelType)
		}
		if c.Thread.Archived {
			return fmt.Errorf("thread %d: %w", threadID, ErrThreadArchived)
		}
		if targetID != userID {
			if !v.Permissions.Has(permissions.SendMessages) {
				return fmt.Errorf("add to thread %d: %w", threadID, ErrMissingPermissions)
			}
			if c.Type == store.ChannelPrivateThread && !v.Permissions.Has(permissions.ManageThreads) &&
				!(c.Thread.Invitable && a.isThreadMember(threadID, userID)) {
				return fmt.Errorf("invite to private thread %d: %w", threadID, ErrMissingPermissions)
			}
			if _, ok := a.members[targetID]; !ok {
				return fmt.Errorf("user %d: %w", targetID, ErrUnknownMember)
			}
			if !a.canView(targetID, c.ParentID) {
				return fmt.Errorf("user %d cannot see %d: %w", targetID, c.ParentID, ErrMissingAccess)
			}
		}
		return a.joinThread(ctx, threadID, targetID)
	})
}

// joinThread records a membership and sends THREAD_MEMBERS_UPDATE (and
// THREAD_CREATE to the new member of a private thread, who sees it now).
func (a *Actor) joinThread(ctx context.Context, threadID, userID snowflake.ID) error {
	if a.isThreadMember(threadID, userID) {
		return nil
	}
	m := store.ThreadMember{ThreadID: threadID, UserID: userID, JoinedAt: a.svc.cfg.Now()}
	if _, err := a.svc.deps.Store.PutThreadMember(ctx, m); err != nil {
		return storeErr("put thread member", err)
	}
	if a.threadMembers[threadID] == nil {
		a.threadMembers[threadID] = map[snowflake.ID]store.ThreadMember{}
	}
	a.threadMembers[threadID][userID] = m
	if err := a.countMembers(ctx, threadID); err != nil {
		return err
	}
	a.membersUpdate(ctx, threadID, []store.ThreadMember{m}, nil)
	a.syncVisibility(ctx, nil, nil, userID)
	return nil
}

// countMembers persists a thread's member count.
func (a *Actor) countMembers(ctx context.Context, threadID snowflake.ID) error {
	c := cloneThread(*a.channels[threadID])
	c.Thread.MemberCount = len(a.threadMembers[threadID])
	return a.putChannel(ctx, c)
}

// RemoveMember removes targetID from a thread as userID (leaving
// when they are the same; removing someone else needs MANAGE_THREADS, or
// being the creator of a private thread). The thread must not be
// archived.
func (th *Threads) RemoveMember(ctx context.Context, userID, threadID, targetID snowflake.ID) error {
	s := th.s
	guildID, err := s.guildOf(ctx, threadID)
	if err != nil {
		return err
	}
	return s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, threadID, 0)
		if err != nil {
			return err
		}
		c := v.Channel
		if c.Thread == nil {
			return fmt.Errorf("channel %d is not a thread: %w", threadID, ErrWrongChannelType)
		}
		if c.Thread.Archived {
			return fmt.Errorf("thread %d: %w", threadID, ErrThreadArchived)
		}
		if targetID != userID && !v.Permissions.Has(permissions.ManageThreads) &&
			!(c.Type == store.ChannelPrivateThread && c.OwnerID == userID) {
			return fmt.Errorf("remove from thread %d: %w", threadID, ErrMissingPermissions)
		}
		if !a.isThreadMember(threadID, targetID) {
			return fmt.Errorf("user %d in thread %d: %w", targetID, threadID, ErrUnknownThreadMember)
		}
		if _, err := a.svc.deps.Store.DeleteThreadMember(ctx, threadID, targetID); err != nil {
			return storeErr("delete thread member", err)
		}
		delete(a.threadMembers[threadID], targetID)
		if err := a.countMembers(ctx, threadID); err != nil {
			return err
		}
		a.membersUpdate(ctx, threadID, nil, []snowflake.ID{targetID})
		a.syncVisibility(ctx, nil, nil, targetID)
		return nil
	})
}

// membersUpdate sends THREAD_MEMBERS_UPDATE to the sessions that see the
// thread: those with GUILD_MEMBERS, and the added or removed users' own
// (Discord sends other users' changes only with that intent). A removed
// user who no longer sees the thread still learns of their removal.
func (a *Actor) membersUpdate(ctx context.Context, threadID snowflake.ID, added []store.ThreadMember, removed []snowflake.ID) {
	ev := wire.ThreadMembersUpdate{ID: threadID, GuildID: a.id, MemberCount: len(a.threadMembers[threadID]), RemovedMemberIDs: removed}
	concerned := make(map[snowflake.ID]bool)
	for _, m := range added {
		wm := wire.ThreadMemberFrom(m)
		if mem, ok := a.members[m.UserID]; ok {
			w := a.wireMember(ctx, *mem)
			wm.Member = &w
		}
		ev.AddedMembers = append(ev.AddedMembers, wm)
		concerned[m.UserID] = true
	}
	for _, id := range removed {
		concerned[id] = true
	}
	b := newBatcher("THREAD_MEMBERS_UPDATE", mustJSON(ev))
	for _, sub := range a.sortedSubs() {
		mine := concerned[sub.s.UserID]
		if !mine && !wants(sub.s, IntentGuildMembers) {
			continue
		}
		if a.canView(sub.s.UserID, threadID) || slices.Contains(removed, sub.s.UserID) {
			b.add(sub.s, 0)
		}
	}
	b.flushGuild(ctx, a)
}

// Member returns targetID's membership of a thread userID sees.
func (th *Threads) Member(ctx context.Context, userID, threadID, targetID snowflake.ID) (store.ThreadMember, error) {
	var out store.ThreadMember
	err := th.inThread(ctx, userID, threadID, func(a *Actor, _ store.Channel) error {
		m, ok := a.threadMembers[threadID][targetID]
		if !ok {
			return fmt.Errorf("user %d in thread %d: %w", targetID, threadID, ErrUnknownThreadMember)
		}
		out = m
		return nil
	})
	return out, err
}

// Members lists the members of a thread userID sees, by user id,
// above after, at most limit.
func (th *Threads) Members(ctx context.Context, userID, threadID, after snowflake.ID, limit int) ([]store.ThreadMember, error) {
	var out []store.ThreadMember
	err := th.inThread(ctx, userID, threadID, func(a *Actor, _ store.Channel) error {
		for id, m := range a.threadMembers[threadID] {
			if id > after {
				out = append(out, m)
			}
		}
		slices.SortFunc(out, func(x, y store.ThreadMember) int { return cmpID(x.UserID, y.UserID) })
		if len(out) > limit {
			out = out[:limit]
		}
		return nil
	})
	return out, err
}

// inThread runs fn for a thread userID sees now.
func (th *Threads) inThread(ctx context.Context, userID, threadID snowflake.ID, fn func(a *Actor, c store.Channel) error) error {
	s := th.s
	guildID, err := s.guildOf(ctx, threadID)
	if err != nil {
		return err
	}
	return s.do(ctx, guildID, func(a *Actor) error {
		v, err := a.channelFor(userID, threadID, 0)
		if err != nil {
			return err
		}
		if v.Channel.Thread == nil {
			return fmt.Errorf("channel %d is not a thread: %w", threadID, ErrWrongChannelType)
		}
		return fn(a, v.Channel)
	})
}

// ThreadList is a list of threads with the caller's own memberships of
// them.
type ThreadList struct {
	Threads []store.Channel
	Members []store.ThreadMember
	HasMore bool
}

func (a *Actor) ownMemberships(userID snowflake.ID, threads []store.Channel) []store.ThreadMember {
	out := []store.ThreadMember{}
	for _, c := range threads {
		if m, ok := a.threadMembers[c.ID][userID]; ok {
			out = append(out, m)
		}
	}
	return out
}

// Active lists a guild's active (unarchived) threads userID sees,
// by id.
func (th *Threads) Active(ctx context.Context, userID, guildID snowflake.ID) (ThreadList, error) {
	s := th.s
	var out ThreadList
	err := s.do(ctx, guildID, func(a *Actor) error {
		if _, err := a.member(userID); err != nil {
			return err
		}
		out.Threads = a.activeThreads(userID)
		out.Members = a.ownMemberships(userID, out.Threads)
		return nil
	})
	return out, err
}

// activeThreads returns the active threads userID sees, by id.
func (a *Actor) activeThreads(userID snowflake.ID) []store.Channel {
	out := []store.Channel{}
	for id, c := range a.channels {
		if c.Thread != nil && !c.Thread.Archived && a.canView(userID, id) {
			out = append(out, cloneThread(*c))
		}
	}
	slices.SortFunc(out, func(x, y store.Channel) int { return cmpID(x.ID, y.ID) })
	return out
}

// ArchivedQuery selects archived threads of a channel.
type ArchivedQuery struct {
	ParentID snowflake.ID
	// Private lists private threads (MANAGE_THREADS, or Joined); else
	// public ones (READ_MESSAGE_HISTORY).
	Private bool
	// Joined lists only private threads the caller is a member of.
	Joined bool
	// Before bounds the archive timestamp (zero: none); Limit caps the
	// page.
	Before time.Time
	Limit  int
}

// Archived lists a channel's archived threads, most recently
// archived first.
func (th *Threads) Archived(ctx context.Context, userID snowflake.ID, q ArchivedQuery) (ThreadList, error) {
	s := th.s
	guildID, err := s.guildOf(ctx, q.ParentID)
	if err != nil {
		return ThreadList{}, err
	}
	var out ThreadList
	err = s.do(ctx, guildID, func(a *Actor) error {
		need := permissions.ReadMessageHistory
		if q.Private && !q.Joined {
			need |= permissions.ManageThreads
		}
		if _, err := a.channelFor(userID, q.ParentID, need); err != nil {
			return err
		}
		var list []store.Channel
		for id, c := range a.channels {
			if c.Thread == nil || !c.Thread.Archived || c.ParentID != q.ParentID {
				continue
			}
			if (c.Type == store.ChannelPrivateThread) != q.Private {
				continue
			}
			if q.Joined && !a.isThreadMember(id, userID) {
				continue
			}
			if !q.Before.IsZero() && !c.Thread.ArchiveTimestamp.Before(q.Before) {
				continue
			}
			if a.canView(userID, id) {
				list = append(list, cloneThread(*c))
			}
		}
		slices.SortFunc(list, func(x, y store.Channel) int {
			if c := y.Thread.ArchiveTimestamp.Compare(x.Thread.ArchiveTimestamp); c != 0 {
				return c
			}
			return cmpID(y.ID, x.ID)
		})
		if len(list) > q.Limit {
			list, out.HasMore = list[:q.Limit], true
		}
		if list == nil {
			list = []store.Channel{}
		}
		out.Threads = list
		out.Members = a.ownMemberships(userID, list)
		return nil
	})
	return out, err
}

// threadSend applies the thread rules to a send in thread c, whose
// permissions for the sender are p: a locked thread takes messages only
// from MANAGE_THREADS; an archived one is unarchived by the send (when
// not locked, or by a moderator); the sender joins the thread.
func (a *Actor) threadSend(ctx context.Context, c *store.Channel, userID snowflake.ID, p permissions.Bits) error {
	mod := p.Has(permissions.ManageThreads)
	if c.Thread.Locked && !mod {
		if c.Thread.Archived {
			return fmt.Errorf("thread %d: %w", c.ID, ErrThreadArchived)
		}
		return fmt.Errorf("send in %d: %w", c.ID, ErrThreadLocked)
	}
	if c.Thread.Archived {
		if err := a.setArchived(ctx, c.ID, false); err != nil {
			return err
		}
	}
	return a.joinThread(ctx, c.ID, userID)
}

// threadMessage counts a message posted in a thread.
func (a *Actor) threadMessage(ctx context.Context, c *store.Channel) {
	t := cloneThread(*c)
	t.Thread.MessageCount++
	if err := a.putChannel(ctx, t); err != nil {
		a.svc.log.Warn("thread message count not saved", "thread_id", c.ID, "err", err)
	}
}

// threadSync is the threads a session gained together with their parent.
type threadSync struct {
	s       event.Session
	threads []snowflake.ID
}

// sendThreadSyncs sends each session THREAD_LIST_SYNC for the active
// threads that appeared with their parent channel (Discord's event when a
// user gains access to a channel), after that channel's CHANNEL_CREATE.
func (a *Actor) sendThreadSyncs(ctx context.Context, syncs []threadSync) {
	for _, sy := range syncs {
		ev := wire.ThreadListSync{GuildID: a.id, Threads: []wire.Channel{}, Members: []wire.ThreadMember{}}
		parents := map[snowflake.ID]bool{}
		slices.Sort(sy.threads)
		for _, id := range sy.threads {
			c := a.channels[id]
			if c == nil || c.Thread.Archived {
				continue
			}
			ev.Threads = append(ev.Threads, wire.ChannelFrom(*c, nil))
			if m, ok := a.threadMembers[id][sy.s.UserID]; ok {
				ev.Members = append(ev.Members, wire.ThreadMemberFrom(m))
			}
			if !parents[c.ParentID] {
				parents[c.ParentID] = true
				ev.ChannelIDs = append(ev.ChannelIDs, c.ParentID)
			}
		}
		if len(ev.Threads) > 0 {
			slices.Sort(ev.ChannelIDs)
			a.sendTo(ctx, sy.s, "THREAD_LIST_SYNC", ev)
		}
	}
}
